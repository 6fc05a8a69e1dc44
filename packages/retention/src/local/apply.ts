import { messageOf } from "@ckpt/errors";
import { type Dirent, readdir as readdirCallback } from "node:fs";
import { lstat, readdir, rename, rm, unlink } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import {
  CHECKPOINT_ARTIFACTS_DIR,
  CHECKPOINTS_DIR,
  fsyncDirectory,
  LATEST_POINTER,
  mapPool,
  UPLOADED_MARKER,
  ManifestError,
  parseIterDir,
} from "@ckpt/manifest";
import { RetentionError } from "../errors.js";
import { abortedError } from "../internal/abort.js";
import type { RetentionPlan, RetentionTarget } from "./plan.js";
import type { CheckpointEntry, CheckpointInfo, UploadState } from "./policies.js";

/** Optimizer state in an iteration directory: a consolidated file or a directory of shards. */
const OPTIMIZER_FILE = "optim.pt";
const OPTIMIZER_DIR = "optim";
/** A directory being removed is first renamed to a dot name ending in this, so a crash leaves it recognisable. */
export const DELETING_SUFFIX = ".ckpt-deleting";
/** Iteration directories a scan reads at once: enough to keep the filesystem's thread pool busy. */
const SCAN_CONCURRENCY = 32;

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Refuses anything but a `checkpoints/` directory: artifacts are released only by prune-verified. */
function requireCheckpointRoot(root: string, action: string): string {
  const absolute = resolve(root);
  const name = basename(absolute);
  if (name !== CHECKPOINTS_DIR) {
    const hint =
      name === CHECKPOINT_ARTIFACTS_DIR
        ? `${CHECKPOINT_ARTIFACTS_DIR}/ is never touched by retention policies; release artifacts with \`ckpt artifact prune-verified\`.`
        : `Pass the run attempt's ${CHECKPOINTS_DIR}/ directory.`;
    throw new RetentionError(
      "RETENTION_NOT_A_CHECKPOINT_ROOT",
      `${action} ${absolute}: it is not a ${CHECKPOINTS_DIR}/ directory. ${hint}`,
      { kind: "input", subject: absolute },
    );
  }
  return absolute;
}

/**
 * A directory's entries, names and kinds, from one listing (a symbolic link is `other`: never
 * followed); a directory that does not exist (removed meanwhile) has none.
 */
export function listEntries(dir: string): Promise<CheckpointEntry[]> {
  // The callback API: half the CPU of fs/promises' per call, and a scan makes one per checkpoint.
  return new Promise((resolve, reject) =>
    readdirCallback(dir, { withFileTypes: true }, (error, listing) => {
      if (error !== null) return errnoOf(error) === "ENOENT" ? resolve([]) : reject(error);
      resolve(
        listing.map((e) => ({ name: e.name, kind: e.isFile() ? "file" : e.isDirectory() ? "dir" : "other" })),
      );
    }),
  );
}

/**
 * Whether an iteration directory holds optimizer state and what its `.uploaded` says, from one
 * listing of it, which is kept: the receipt is read only when the listing shows one (on a root of
 * thousands of checkpoints, probing absent names one by one is most of the scan). A directory
 * removed since the root was listed holds nothing.
 */
async function listIterationDir(
  dir: string,
): Promise<Pick<CheckpointInfo, "hasOptimizer" | "uploaded" | "entries">> {
  const entries = await listEntries(dir);
  const names = new Set(entries.map((e) => e.name));
  return {
    hasOptimizer: names.has(OPTIMIZER_FILE) || names.has(OPTIMIZER_DIR),
    uploaded: names.has(UPLOADED_MARKER.fileName) ? await uploadStateOf(dir) : "none",
    entries,
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return false;
    throw error;
  }
}

async function uploadStateOf(dir: string): Promise<UploadState> {
  try {
    const read = await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName));
    return read.legacy ? "legacy" : "receipt";
  } catch (error) {
    // Absent, or damaged: neither proves an upload, so the copy is treated as the only one.
    if (error instanceof ManifestError && error.kind === "input") return "none";
    throw error;
  }
}

export interface ScanOptions {
  /** Metrics recorded with a checkpoint (e.g. by the trainer's validation), for `bestN`. */
  readonly readMetrics?: (
    dir: string,
    iteration: number,
  ) => Promise<Readonly<Record<string, number>> | undefined>;
  readonly signal?: AbortSignal;
}

/**
 * Lists the `iter_*` directories of a `checkpoints/` root (any digit count), with whether each
 * holds optimizer state, what `.uploaded` says, whether `latest_checkpoint.txt` names it, and its
 * own listing (one `readdir` each, which says all of that). A
 * root that does not exist yet has no checkpoints. Symbolic links and other names are ignored.
 * Iteration directories are read concurrently (a bounded number at once); the result is sorted.
 */
export async function scanCheckpointRoot(root: string, options: ScanOptions = {}): Promise<CheckpointInfo[]> {
  const absolute = requireCheckpointRoot(root, "scan checkpoints");
  let entries: Dirent[];
  try {
    entries = await readdir(absolute, { withFileTypes: true });
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return [];
    throw new RetentionError(
      "RETENTION_SCAN_FAILED",
      `scan checkpoints ${absolute}: ${messageOf(error)}. Check that the directory is readable.`,
      { kind: "failed", subject: absolute, cause: error },
    );
  }
  let latest: number | undefined;
  try {
    latest = (await LATEST_POINTER.read(join(absolute, LATEST_POINTER.fileName))).iteration;
  } catch (error) {
    if (!(error instanceof ManifestError && error.code === "RECORD_NOT_FOUND")) {
      throw new RetentionError(
        "RETENTION_SCAN_FAILED",
        `scan checkpoints ${absolute}: ${messageOf(error)} Retention needs to know the resume source before removing anything.`,
        { kind: "refused", subject: absolute, cause: error },
      );
    }
  }
  const iterations = entries.flatMap((entry) => {
    const iteration = parseIterDir(entry.name);
    return iteration === undefined || !entry.isDirectory()
      ? []
      : [{ iteration, dir: join(absolute, entry.name) }];
  });
  const infos = await mapPool(iterations, SCAN_CONCURRENCY, async ({ iteration, dir }) => {
    if (options.signal?.aborted) throw abortedError(`scan checkpoints ${absolute}`, options.signal);
    try {
      const metrics = await options.readMetrics?.(dir, iteration);
      return {
        iteration,
        dir,
        ...(await listIterationDir(dir)),
        ...(metrics === undefined ? {} : { metrics }),
        ...(latest === iteration ? { isLatest: true } : {}),
      } satisfies CheckpointInfo;
    } catch (error) {
      if (error instanceof RetentionError) throw error;
      throw new RetentionError(
        "RETENTION_SCAN_FAILED",
        `scan checkpoint ${dir}: ${messageOf(error)}. Check that the directory is readable.`,
        { kind: "failed", subject: dir, cause: error },
      );
    }
  });
  return infos.sort((a, b) => a.iteration - b.iteration || (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0));
}

/** Bytes of the regular files under a path (0 when it does not exist). */
async function treeBytes(path: string): Promise<number> {
  const info = await lstat(path);
  if (!info.isDirectory()) return info.isFile() ? info.size : 0;
  let total = 0;
  for (const name of await readdir(path)) total += await treeBytes(join(path, name));
  return total;
}

/** Removes a directory by renaming it aside first, so it disappears at once and a crash leaves a dot name. */
async function removeDirectory(parent: string, name: string): Promise<number> {
  const aside = join(parent, `.${name}${DELETING_SUFFIX}`);
  await rm(aside, { recursive: true, force: true });
  await rename(join(parent, name), aside);
  await fsyncDirectory(parent);
  const bytes = await treeBytes(aside);
  await rm(aside, { recursive: true, force: true });
  await fsyncDirectory(parent);
  return bytes;
}

export interface AppliedRemoval {
  readonly target: RetentionTarget;
  readonly iteration: number;
  readonly dir: string;
  /** What was removed, relative to the checkpoints root (empty when it was already gone). */
  readonly paths: readonly string[];
  readonly bytes: number;
}

export interface RetentionApplyError {
  readonly dir: string;
  /** `latest_pointer`: the removal would take the resume source; `remove_failed`: the filesystem refused. */
  readonly code: "latest_pointer" | "remove_failed";
  readonly message: string;
}

export interface RetentionApplyReport {
  readonly removed: readonly AppliedRemoval[];
  readonly errors: readonly RetentionApplyError[];
  readonly freed_bytes: number;
}

export type RetentionApplyEvent =
  | { readonly type: "removing"; readonly target: RetentionTarget; readonly dir: string }
  | { readonly type: "removed"; readonly removal: AppliedRemoval };

export interface ApplyRetentionOptions {
  /** The `checkpoints/` directory the plan was made for; every removal must be one of its `iter_*`. */
  readonly root: string;
  readonly signal?: AbortSignal;
  readonly onEvent?: (event: RetentionApplyEvent) => void;
}

/**
 * Removes exactly what a plan says: the optimizer state (`optim.pt`, `optim/`) or the whole
 * `iter_*` directory, each directory renamed aside before it is deleted and the parent fsynced.
 * Every target is checked to be an `iter_*` directly under `root` before anything is removed
 * (`RETENTION_TARGET_OUTSIDE_ROOT`). The iteration `latest_checkpoint.txt` names at this moment is
 * never touched (reported as an error).
 */
export async function applyRetentionPlan(
  plan: RetentionPlan,
  options: ApplyRetentionOptions,
): Promise<RetentionApplyReport> {
  const root = requireCheckpointRoot(options.root, "apply retention in");
  for (const removal of plan.remove) {
    const name = basename(removal.dir);
    if (resolve(removal.dir) !== join(root, name) || parseIterDir(name) !== removal.iteration) {
      throw new RetentionError(
        "RETENTION_TARGET_OUTSIDE_ROOT",
        `apply retention in ${root}: the plan names ${removal.dir}, which is not iteration ${removal.iteration} ` +
          "directly under this root. Plan and apply with the same root.",
        { kind: "input", subject: removal.dir },
      );
    }
  }
  let latest: number | undefined;
  try {
    latest = (await LATEST_POINTER.read(join(root, LATEST_POINTER.fileName))).iteration;
  } catch {
    latest = undefined;
  }
  const removed: AppliedRemoval[] = [];
  const errors: RetentionApplyError[] = [];
  for (const removal of plan.remove) {
    if (options.signal?.aborted) throw abortedError(`apply retention in ${root}`, options.signal);
    const dir = resolve(removal.dir);
    const name = basename(dir);
    if (removal.iteration === latest) {
      errors.push({
        dir,
        code: "latest_pointer",
        message: `remove ${removal.target === "iteration" ? dir : join(dir, "optim*")}: ${LATEST_POINTER.fileName} names it, so it is the resume source. Re-plan after a newer checkpoint is committed.`,
      });
      continue;
    }
    options.onEvent?.({ type: "removing", target: removal.target, dir });
    try {
      const paths: string[] = [];
      let bytes = 0;
      if (removal.target === "iteration") {
        if (await exists(dir)) {
          bytes = await removeDirectory(root, name);
          paths.push(name);
        }
      } else {
        const file = join(dir, OPTIMIZER_FILE);
        if (await exists(file)) {
          bytes += (await lstat(file)).size;
          await unlink(file);
          await fsyncDirectory(dir);
          paths.push(`${name}/${OPTIMIZER_FILE}`);
        }
        if (await exists(join(dir, OPTIMIZER_DIR))) {
          bytes += await removeDirectory(dir, OPTIMIZER_DIR);
          paths.push(`${name}/${OPTIMIZER_DIR}`);
        }
      }
      const done: AppliedRemoval = {
        target: removal.target,
        iteration: removal.iteration,
        dir,
        paths,
        bytes,
      };
      removed.push(done);
      options.onEvent?.({ type: "removed", removal: done });
    } catch (error) {
      errors.push({
        dir,
        code: "remove_failed",
        message: `remove ${removal.target === "iteration" ? "" : "the optimizer state of "}${dir}: ${messageOf(error)}. Check permissions and run retention again.`,
      });
    }
  }
  return { removed, errors, freed_bytes: removed.reduce((sum, r) => sum + r.bytes, 0) };
}
