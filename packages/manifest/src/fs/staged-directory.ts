import { lstat, readdir, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { ManifestError } from "../errors.js";
import { readBoundedFile } from "../records/common.js";
import { fsyncDirectory } from "./atomic.js";

/**
 * A directory built beside its final path and swapped in whole (orbax's `TemporaryPath`): a crash
 * leaves the old directory or the new one; between the swap's two renames the old one waits at
 * `previous`, and the next run (under the tool's lock) finishes or undoes the swap.
 */
export interface StagedPaths {
  readonly final: string;
  readonly staging: string;
  readonly previous: string;
}

/** The two calls a swap makes, injectable so a test can see their order. */
export interface SwapIo {
  rename(from: string, to: string): Promise<void>;
  fsyncDirectory(dir: string): Promise<void>;
}

const NODE_IO: SwapIo = { rename, fsyncDirectory };

/** What a path is, without following a symbolic link (a symlink, FIFO or socket is `other`). */
export type PathKind = "absent" | "file" | "dir" | "other";

/** {@link pathKind}, with the size of a regular file (0 for anything else). */
export async function pathInfo(path: string): Promise<{ kind: PathKind; size: number }> {
  try {
    const info = await lstat(path);
    if (info.isFile()) return { kind: "file", size: info.size };
    return { kind: info.isDirectory() ? "dir" : "other", size: 0 };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "absent", size: 0 };
    throw error;
  }
}

/** The one `lstat` -> kind classifier of every package. */
export async function pathKind(path: string): Promise<PathKind> {
  return (await pathInfo(path)).kind;
}

/** Renames, then fsyncs the target's parent, so the rename survives a power loss before the next step. */
export async function renameDurably(from: string, to: string, io: SwapIo = NODE_IO): Promise<void> {
  await io.rename(from, to);
  await io.fsyncDirectory(dirname(to));
}

/**
 * Puts a finished `staging` in place of `final`: `final` -> `previous`, `staging` -> `final`, each
 * rename fsynced, then `removePrevious(previous)`. Returns whether a `final` was replaced.
 */
export async function swapIntoPlace(
  paths: StagedPaths,
  removePrevious: (previous: string) => Promise<void>,
  io: SwapIo = NODE_IO,
): Promise<boolean> {
  await io.fsyncDirectory(paths.staging);
  let replaced = false;
  try {
    await renameDurably(paths.final, paths.previous, io);
    replaced = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  await renameDurably(paths.staging, paths.final, io);
  if (replaced) await removePrevious(paths.previous);
  return replaced;
}

/** The step an interrupted swap needs: none, or one of the two renames that make `final` whole again. */
export type SwapRecovery = "none" | "finish" | "undo";

/**
 * Decides how to end a swap interrupted between its renames (`previous` there, `final` absent):
 * finish it when `staging` is a complete build, else put `previous` back. Pure.
 */
export function decideSwapRecovery(kinds: {
  final: PathKind;
  previous: PathKind;
  stagingComplete: boolean;
}): SwapRecovery {
  if (kinds.previous !== "dir" || kinds.final !== "absent") return "none";
  return kinds.stagingComplete ? "finish" : "undo";
}

/** Carries out {@link decideSwapRecovery}'s step, fsynced. */
export async function recoverSwap(
  paths: StagedPaths,
  step: SwapRecovery,
  io: SwapIo = NODE_IO,
): Promise<void> {
  if (step === "finish") await renameDurably(paths.staging, paths.final, io);
  else if (step === "undo") await renameDurably(paths.previous, paths.final, io);
}

/** Whether a directory is this tool's to replace or remove, and if not, why. */
export type Ownership<T = unknown> =
  | { readonly owned: true; readonly record: T }
  | { readonly owned: false; readonly reason: string };

/**
 * The ownership rule (issue 16): a directory is a tool's only when its record is a regular file
 * that parses, validates and names the tool (`parse` throws otherwise). A missing, garbage,
 * empty-JSON or non-file record makes the directory foreign.
 */
export async function readOwnership<T>(
  dir: string,
  recordFile: string,
  parse: (bytes: Uint8Array, name: string) => T,
): Promise<Ownership<T>> {
  const path = join(dir, recordFile);
  try {
    return { owned: true, record: parse(await readBoundedFile(path), path) };
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    if (error.code === "RECORD_NOT_FOUND") return { owned: false, reason: `it has no ${recordFile}` };
    return { owned: false, reason: `its ${recordFile} is not this tool's record (${error.message})` };
  }
}

export interface RemoveOwnedOptions {
  /** Says whether `dir` is ours; a foreign directory is left untouched and `refuse(reason)` thrown. */
  readonly ownership: (dir: string) => Promise<Ownership>;
  readonly refuse: (dir: string, reason: string) => Error;
  /** Removed last, so a kill halfway leaves a tree still recognisably ours. */
  readonly recordsLast?: readonly string[];
}

/**
 * Removes a directory only after its ownership check passes; absent is fine, a symbolic link (or
 * any non-directory) under the name is refused untouched. Fsyncs the parent.
 */
export async function removeOwnedDirectory(dir: string, options: RemoveOwnedOptions): Promise<void> {
  const kind = await pathKind(dir);
  if (kind === "absent") return;
  // A link named like our directory would have its target's entries removed through it.
  if (kind !== "dir") throw options.refuse(dir, "it is a symbolic link or not a directory, never followed");
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const ownership = await options.ownership(dir);
  if (!ownership.owned) throw options.refuse(dir, ownership.reason);
  const last = options.recordsLast ?? [];
  for (const name of names)
    if (!last.includes(name)) await rm(join(dir, name), { recursive: true, force: true });
  for (const name of last) await rm(join(dir, name), { force: true });
  await rm(dir, { recursive: true, force: true });
  await fsyncDirectory(dirname(dir));
}
