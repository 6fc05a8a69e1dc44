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

/** Causes followed before giving up: a wrapped errno is one or two levels down, never more. */
const MAX_CAUSE_DEPTH = 8;

/**
 * Whether an error is the filesystem refusing a write for lack of space (ENOSPC) or of quota
 * (EDQUOT), or was caused by one: a writer's own error (an atomic write's `FS_WRITE_FAILED`)
 * keeps the errno in its `cause`.
 */
export function isNoSpace(error: unknown): boolean {
  let at = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && typeof at === "object" && at !== null; depth++) {
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
