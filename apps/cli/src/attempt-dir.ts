import { readdir, stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { CHECKPOINT_ARTIFACTS_DIR, CHECKPOINTS_DIR, classifyIterPath, isRunTs } from "@ckpt/manifest";
import { UsageError } from "./errors.js";

const ATTEMPT_SHAPE = "<output_root>/<project>/<group>/<name>/<RUN_TS>";

/** What a path given where a run attempt is expected turned out to be. */
interface AttemptDirFacts {
  readonly isDirectory: boolean;
  /** It holds checkpoints/ or checkpoint_artifacts/ (the attempt's own directories). */
  readonly holdsRoots: boolean;
}

/**
 * Why `dir` is not a run attempt, with the directory to pass instead when it is a checkpoint root
 * or a checkpoint; undefined when it is one. Pure.
 */
function attemptDirRefusal(dir: string, facts: AttemptDirFacts): string | undefined {
  if (!facts.isDirectory) return `${dir} is not a directory; pass a run attempt directory ${ATTEMPT_SHAPE}.`;
  if (facts.holdsRoots) return undefined;
  const iter = classifyIterPath(dir);
  if (iter !== undefined) {
    return `${dir} is ${iter.root === CHECKPOINTS_DIR ? "checkpoint" : "artifact"} iteration ${iter.iteration}; pass its run attempt ${iter.attemptDir}.`;
  }
  const trimmed = dir.length > 1 && dir.endsWith("/") ? dir.slice(0, -1) : dir;
  const name = basename(trimmed);
  if (name === CHECKPOINTS_DIR || name === CHECKPOINT_ARTIFACTS_DIR) {
    return `${dir} is a ${name}/ root; pass its run attempt ${dirname(trimmed)}.`;
  }
  return `${dir} holds neither ${CHECKPOINTS_DIR}/ nor ${CHECKPOINT_ARTIFACTS_DIR}/; pass a run attempt directory ${ATTEMPT_SHAPE}.`;
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/** Refuses (exit 2) anything but a run attempt directory: every command taking one enters here. */
export async function requireAttemptDir(dir: string): Promise<void> {
  const directory = await isDirectory(dir);
  const holdsRoots =
    directory &&
    (
      await Promise.all([CHECKPOINTS_DIR, CHECKPOINT_ARTIFACTS_DIR].map((d) => isDirectory(`${dir}/${d}`)))
    ).some(Boolean);
  const refusal = attemptDirRefusal(dir, { isDirectory: directory, holdsRoots });
  if (refusal !== undefined) throw new UsageError(refusal);
}

/** Refuses (exit 2) anything but a run directory (one holding RUN_TS attempts) or a run attempt directory. */
export async function requireRunOrAttemptDir(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  if (names.some((name) => isRunTs(name))) return;
  await requireAttemptDir(dir);
}
