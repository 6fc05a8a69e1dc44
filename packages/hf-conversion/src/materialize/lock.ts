import { messageOf } from "@ckpt/errors";
import { describeLockHolder, type HeldLock, lockDirectory } from "@ckpt/manifest";
import { HfConversionError, refusal } from "../errors.js";

/** A holder that stopped refreshing its lock this long ago is stale (proper-lockfile's mtime rule). */
export const LOCK_STALE_MS = 10_000;

function lockPathFor(out: string): string {
  return `${out}.lock`;
}

export interface OutputLock {
  readonly holder: HeldLock["holder"];
  /** Throws MATERIALIZE_LOCK_LOST when the lock was taken from us (it went stale or was removed). */
  assertHeld(): void;
  release(): Promise<void>;
}

/**
 * Takes `<out>.lock` (@ckpt/manifest's lockDirectory), naming this process and the tool inside
 * it. A held lock is polled for up to `waitSeconds`, then refused by name.
 */
export async function acquireOutputLock(
  out: string,
  options: { waitSeconds: number; signal?: AbortSignal; onWait?: (holder: string) => void; now?: () => Date },
): Promise<OutputLock> {
  const lockDir = lockPathFor(out);
  const outcome = await lockDirectory({
    lockDir,
    holderFields: { tool: "ckpt materialize-hf" },
    staleMs: LOCK_STALE_MS,
    waitMs: options.waitSeconds * 1000,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(options.now === undefined ? {} : { now: options.now }),
    onWait: (holder) => options.onWait?.(describeLockHolder(holder)),
  });
  switch (outcome.status) {
    case "held": {
      const { lock } = outcome;
      return {
        holder: lock.holder,
        assertHeld() {
          const lost = lock.lost();
          if (lost !== undefined) {
            throw new HfConversionError(
              "MATERIALIZE_LOCK_LOST",
              `lock ${lockDir}: this run lost its lock (${lost.message}); another materializer may be writing ${out}. Nothing was published; re-run.`,
              { kind: "failed", file: lockDir, stage: "lock", cause: lost },
            );
          }
        },
        release: () => lock.release(),
      };
    }
    case "aborted":
      throw new HfConversionError("MATERIALIZE_ABORTED", `lock ${lockDir}: aborted while waiting.`, {
        kind: "failed",
        stage: "lock",
      });
    case "failed":
      throw new HfConversionError(
        "MATERIALIZE_BUILD_FAILED",
        `lock ${lockDir}: ${messageOf(outcome.error)}.`,
        {
          kind: "failed",
          file: lockDir,
          stage: "lock",
          cause: outcome.error,
        },
      );
    case "busy":
      throw refusal(
        "MATERIALIZE_LOCKED",
        `${lockDir} is held by ${describeLockHolder(outcome.holder)}${options.waitSeconds > 0 ? ` after waiting ${options.waitSeconds} s` : ""}`,
        `the build would have written ${out} while another materializer does`,
        "Wait for it to finish (or raise --lock-wait-seconds); a killed holder's lock expires by itself.",
        { file: lockDir },
      );
  }
}
