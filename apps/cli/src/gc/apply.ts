import { lstat, rmdir, unlink } from "node:fs/promises";
import { removeOwnedStageFiles } from "@ckpt/archive-reader";
import { removeLockOfDeadHolder, STAGED_RECORD } from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import type { GcItem } from "./plan.js";

// Carries out what decideGc decided, item by item; a change seen meanwhile keeps the item.

/** An item after the run: what was done, or would be under --dry-run. */
export interface GcOutcome extends Omit<GcItem, "action" | "upload"> {
  readonly action: "removed" | "aborted" | "would remove" | "would abort" | "kept" | "failed";
}

function outcome(item: GcItem, action: GcOutcome["action"], reason = item.reason): GcOutcome {
  const { upload: _upload, ...rest } = item;
  return { ...rest, action, reason };
}

async function removeStage(dir: string, files: readonly string[]): Promise<void> {
  // The record goes last, so an interrupted gc leaves a stage still recognisably ours.
  await removeOwnedStageFiles(
    dir,
    files.filter((f) => f !== STAGED_RECORD.fileName),
  );
  await unlink(`${dir}/${STAGED_RECORD.fileName}`);
  await rmdir(dir).catch(() => {
    // Files the record does not name stay, and so does their directory.
  });
}

async function act(item: GcItem, store: ObjectStore | undefined): Promise<GcOutcome> {
  switch (item.kind) {
    case "temporary":
    case "stale-part": {
      // Only a regular file, as decided: anything swapped in under the name stays.
      if (!(await lstat(item.path)).isFile()) return outcome(item, "kept", "no longer a regular file");
      await unlink(item.path);
      return outcome(item, "removed");
    }
    case "incomplete-stage":
      await removeStage(item.path, item.files ?? []);
      return outcome(item, "removed");
    case "lock":
      return removeLockOfDeadHolder(item.path)
        ? outcome(item, "removed")
        : outcome(item, "kept", "its holder changed meanwhile (a live process took the lock)");
    case "incomplete-upload":
      await store!.abortIncompleteUpload!(item.upload!);
      return outcome(item, "aborted");
  }
}

/** Applies the decided items (or, under `dryRun`, says what would be done); never throws per item. */
export async function applyGc(
  items: readonly GcItem[],
  options: { readonly dryRun: boolean; readonly store?: ObjectStore },
): Promise<GcOutcome[]> {
  const outcomes: GcOutcome[] = [];
  for (const item of items) {
    if (item.action === "keep") outcomes.push(outcome(item, "kept"));
    else if (options.dryRun)
      outcomes.push(outcome(item, item.action === "abort" ? "would abort" : "would remove"));
    else {
      try {
        outcomes.push(await act(item, options.store));
      } catch (error) {
        outcomes.push(outcome(item, "failed", `${item.reason}; failed: ${(error as Error).message}`));
      }
    }
  }
  return outcomes;
}
