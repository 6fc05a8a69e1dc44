import { statfs } from "node:fs/promises";
import { dirname, resolve } from "node:path";

/** A write that will not fit: where, how many bytes it needs, how many the filesystem has free. */
export interface SpaceShortfall {
  readonly path: string;
  readonly needed: number;
  readonly free: number;
}

/**
 * Bytes an unprivileged writer may still use on the filesystem that holds `path`, or would hold
 * it: a path not created yet is answered by its nearest existing ancestor.
 */
export async function freeBytes(path: string): Promise<number> {
  for (let dir = resolve(path); ; dir = dirname(dir)) {
    try {
      const { bavail, bsize } = await statfs(dir);
      return bavail * bsize;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException | undefined)?.code;
      if ((code !== "ENOENT" && code !== "ENOTDIR") || dir === dirname(dir)) throw error;
    }
  }
}

/**
 * The shortfall when `needed` bytes will not fit under `path`, else undefined. A check made
 * before a write of known size, so a full disk is refused before anything is touched.
 */
export async function spaceShortfall(path: string, needed: number): Promise<SpaceShortfall | undefined> {
  const free = await freeBytes(path);
  return needed > free ? { path, needed, free } : undefined;
}

/**
 * Whether an error is the filesystem refusing a write for lack of space (ENOSPC) or of quota
 * (EDQUOT), itself or as the cause of an error that wraps it (an atomic write names its file and
 * keeps the errno as the cause).
 */
export function isNoSpace(error: unknown): boolean {
  for (let at = error, depth = 0; at !== undefined && at !== null && depth < 8; depth++) {
    const code = (at as NodeJS.ErrnoException).code;
    if (code === "ENOSPC" || code === "EDQUOT") return true;
    at = (at as { cause?: unknown }).cause;
  }
  return false;
}

/** The shortfall in the words every no-space message uses. */
export function describeShortfall(shortfall: SpaceShortfall): string {
  return `${shortfall.path} needs ${shortfall.needed} bytes, ${shortfall.free} free`;
}

/** A write the disk stopped part-way, in the words every no-space message uses. */
export function describeUnfinishedWrite(path: string, remaining: number | undefined): string {
  // A stream of unknown length (remaining undefined) cannot say how much was left.
  if (remaining === undefined) return `the disk filled while writing ${path}`;
  return `the disk filled while writing ${path}, ${remaining} bytes still to write`;
}

/**
 * Runs one write step; a full disk it meets is rethrown as the caller's own coded error
 * (`raise`, given the cause), anything else as it was.
 */
export async function raiseNoSpace<T>(write: () => Promise<T>, raise: (cause: unknown) => Error): Promise<T> {
  try {
    return await write();
  } catch (error) {
    throw isNoSpace(error) ? raise(error) : error;
  }
}
