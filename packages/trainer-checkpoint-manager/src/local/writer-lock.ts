import { join } from "node:path";
import { describeLockHolder, type HeldLock, lockDirectory } from "@ckpt/manifest";
import { ManagerError, messageOf } from "../errors.js";

/** The lock directory inside a run attempt; only rank 0's manager writes there while it holds it. */
const WRITER_LOCK_DIR = ".ckpt-writer.lock";
/** A holder on another host that stopped refreshing the lock's mtime this long ago is stale. */
const WRITER_LOCK_STALE_MS = 10_000;
/** How often a second writer looks again while it waits for the holder to go away. */
const POLL_MS = 200;

/**
 * The exclusive local writer lock of a run attempt: rank 0's manager holds
 * `<attempt>/.ckpt-writer.lock` (@ckpt/manifest's lockDirectory) for its whole life, so two
 * managers (two sidecars) never interleave commits, pointers or retention in one attempt. A
 * holder killed on this host is recognised at once; one on another host once its lock is stale.
 */
export class WriterLock {
  private constructor(private readonly lock: HeldLock) {}

  get path(): string {
    return this.lock.path;
  }

  /** Takes the lock, waiting up to `waitMs` for a live holder to finish; then refuses by name. */
  static async acquire(attemptDir: string, runTs: string, waitMs: number): Promise<WriterLock> {
    const path = join(attemptDir, WRITER_LOCK_DIR);
    const outcome = await lockDirectory({
      lockDir: path,
      holderFields: { run_ts: runTs },
      staleMs: WRITER_LOCK_STALE_MS,
      waitMs,
      pollMs: POLL_MS,
    });
    switch (outcome.status) {
      case "held":
        return new WriterLock(outcome.lock);
      case "busy":
        throw new ManagerError(
          "MANAGER_WRITER_LOCKED",
          `open checkpoint manager: ${path} is held by ${describeLockHolder(outcome.holder)}` +
            `${outcome.holder?.run_ts === undefined ? "" : ` (attempt ${outcome.holder.run_ts || "legacy"})`}: another manager (another ckpt-trainer sidecar) ` +
            `is writing this run attempt, and two writers would interleave commits and pointers. Stop the other job, or give this one ` +
            "another name or resume=off. A killed holder's lock is cleared at the next open on its host, or after " +
            `${WRITER_LOCK_STALE_MS / 1000} s elsewhere.`,
          { kind: "refused", subject: path },
        );
      default: {
        const cause = outcome.status === "failed" ? outcome.error : new Error("aborted");
        throw new ManagerError("MANAGER_LAYOUT_FAILED", `take the writer lock ${path}: ${messageOf(cause)}`, {
          kind: "failed",
          subject: path,
          cause,
        });
      }
    }
  }

  /** Throws when the lock was taken from this writer (it went stale under a stalled process, or was removed). */
  assertHeld(what: string): void {
    const lost = this.lock.lost();
    if (lost !== undefined) {
      throw new ManagerError(
        "MANAGER_WRITER_LOCK_LOST",
        `${what}: this manager lost the writer lock ${this.path} (${lost.message}); another writer may own the attempt now. Nothing more is committed; stop and rerun with resume=auto.`,
        { kind: "failed", subject: this.path, cause: lost },
      );
    }
  }

  release(): Promise<void> {
    return this.lock.release();
  }
}
