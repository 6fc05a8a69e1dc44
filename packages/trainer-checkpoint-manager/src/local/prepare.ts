import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  LATEST_POINTER,
  PHYSICAL_COMPONENTS,
  physicalComponentPath,
} from "@ckpt/manifest";
import { ManagerError } from "../errors.js";
import { entryKind, removeOwned } from "../internal/fs.js";
import type { LayoutKind } from "../layout.js";
import type { SavePlan } from "../plan.js";

/** What is at a local save's iteration directory before the save (observed by `prepareLocalSave`). */
export interface LeftoverObservation {
  readonly kind: SavePlan["kind"];
  readonly step: number;
  readonly dir: string;
  readonly layout: LayoutKind;
  /** Something exists at the iteration directory. */
  readonly occupied: boolean;
  /** Full save into an occupied directory: the iteration `latest_checkpoint.txt` names, if readable. */
  readonly latest?: number | undefined;
  /** Artifact save into an occupied directory: its native manifest exists. */
  readonly artifactCommitted?: boolean | undefined;
}

/**
 * What a local save clears before writing: `nothing`; the whole `directory` (a full save past the
 * pointer: an interrupted save of this attempt); or only the component `payloads` an interrupted
 * artifact save wrote (other files are not ours).
 */
export type LeftoverClearance = "nothing" | "directory" | "payloads";

/**
 * Decides what an interrupted save left and may be cleared. Committed history is never rewritten:
 * a full checkpoint at or behind the pointer, or a committed artifact, is refused. Pure.
 */
export function decideLeftovers(seen: LeftoverObservation): LeftoverClearance {
  if (!seen.occupied) return "nothing";
  const { dir, step } = seen;
  if (seen.kind === "full") {
    // The pointer is the commit of a local full checkpoint: at or behind it is committed history.
    if (seen.latest !== undefined && seen.latest >= step) {
      throw new ManagerError(
        "MANAGER_CHECKPOINT_EXISTS",
        `save ${dir}: it holds a committed checkpoint of step ${step}; a full checkpoint is never rewritten. ` +
          (seen.layout === "legacy"
            ? "This happens when training resumed behind newer checkpoints of this legacy flat layout: resume from the latest one (resume=auto), or set run_ts for a fresh attempt beside it."
            : "This happens when training resumed behind newer checkpoints of the same attempt: resume from the latest one, or set resume=off for a fresh attempt."),
        { kind: "refused", subject: dir },
      );
    }
    // Past the pointer is what an interrupted save of this attempt left (even with its description written).
    return "directory";
  }
  if (seen.artifactCommitted === true) {
    throw new ManagerError(
      "MANAGER_ARTIFACT_COMMITTED",
      `save ${dir}: it is a committed artifact of step ${step}; a committed artifact is never committed again. ` +
        "Save the step's remaining components as a full checkpoint, or start a fresh attempt (resume=off).",
      { kind: "refused", subject: join(dir, ARTIFACT_MANIFEST.fileName) },
    );
  }
  return "payloads";
}

/** The iteration `latest_checkpoint.txt` names, or undefined (absent or unreadable). */
export async function latestIteration(checkpointsRoot: string): Promise<number | undefined> {
  try {
    return (await LATEST_POINTER.read(join(checkpointsRoot, LATEST_POINTER.fileName))).iteration;
  } catch {
    return undefined;
  }
}

export interface LocalSave {
  readonly kind: SavePlan["kind"];
  readonly step: number;
  readonly dir: string;
  readonly layout: LayoutKind;
  readonly checkpointsRoot: string;
  readonly roles: readonly string[];
}

/**
 * Rank 0 of a local primary: observes the iteration directory, clears what `decideLeftovers`
 * allows (reporting each cleared path) and creates the directory and its role sub-directories.
 */
export async function prepareLocalSave(save: LocalSave, cleared: (path: string) => void): Promise<void> {
  const { dir } = save;
  const occupied = (await entryKind(dir)) !== "absent";
  const clearance = decideLeftovers({
    kind: save.kind,
    step: save.step,
    dir,
    layout: save.layout,
    occupied,
    ...(occupied && save.kind === "full" ? { latest: await latestIteration(save.checkpointsRoot) } : {}),
    ...(occupied && save.kind === "artifact"
      ? { artifactCommitted: (await entryKind(join(dir, ARTIFACT_MANIFEST.fileName))) !== "absent" }
      : {}),
  });
  if (clearance === "directory") {
    await removeOwned(dir);
    cleared(dir);
  } else if (clearance === "payloads") {
    for (const name of PHYSICAL_COMPONENTS) {
      for (const form of ["file", "dir"] as const) {
        const path = join(dir, physicalComponentPath(name, form));
        if (await removeOwned(path)) cleared(path);
      }
    }
  }
  await mkdir(dir, { recursive: true });
  for (const role of save.roles) await mkdir(join(dir, role), { recursive: true });
}
