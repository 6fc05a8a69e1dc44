import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";

/**
 * Why a path could not be opened as a regular file, for the caller to raise under its own code:
 * `missing` (ENOENT), `not-a-file` (a directory, FIFO, device or socket: `what` says which),
 * `too-large` (over the caller's cap), `unreadable` (any other open failure, with its errno).
 */
export type RegularFileRefusal =
  | { readonly reason: "missing"; readonly path: string; readonly cause: unknown }
  | { readonly reason: "not-a-file"; readonly path: string; readonly what: string }
  | { readonly reason: "too-large"; readonly path: string; readonly size: number; readonly maxBytes: number }
  | { readonly reason: "unreadable"; readonly path: string; readonly errno: string; readonly cause: unknown }
  | { readonly reason: "grew"; readonly path: string };

export type OpenedRegularFile =
  | { readonly ok: true; readonly handle: FileHandle; readonly size: number }
  | ({ readonly ok: false } & RegularFileRefusal);

function kindName(stats: {
  isDirectory(): boolean;
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
}): string {
  if (stats.isDirectory()) return "a directory";
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return "a device";
  if (stats.isSocket()) return "a socket";
  return "not a regular file";
}

/**
 * Opens `path` for reading only if it is a regular file of at most `maxBytes`. Opened with
 * O_NONBLOCK (so a FIFO's open returns at once) and checked with fstat on the open handle (so
 * nothing can be swapped in between a check and the open); `noFollow` refuses a symbolic link as
 * the last component. On success the caller owns the handle; on refusal nothing stays open.
 */
export async function openRegularFile(
  path: string,
  options: { readonly maxBytes: number; readonly noFollow?: boolean },
): Promise<OpenedRegularFile> {
  const flags = constants.O_RDONLY | constants.O_NONBLOCK | (options.noFollow ? constants.O_NOFOLLOW : 0);
  let handle: FileHandle;
  try {
    handle = await open(path, flags);
  } catch (cause) {
    const errno = (cause as NodeJS.ErrnoException).code ?? "error";
    if (errno === "ENOENT") return { ok: false, reason: "missing", path, cause };
    if (errno === "ELOOP" && options.noFollow)
      return { ok: false, reason: "not-a-file", path, what: "a symbolic link" };
    if (errno === "ENXIO") return { ok: false, reason: "not-a-file", path, what: "a socket or FIFO" };
    return { ok: false, reason: "unreadable", path, errno, cause };
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) {
      await handle.close();
      return { ok: false, reason: "not-a-file", path, what: kindName(stats) };
    }
    if (stats.size > options.maxBytes) {
      await handle.close();
      return { ok: false, reason: "too-large", path, size: stats.size, maxBytes: options.maxBytes };
    }
    return { ok: true, handle, size: stats.size };
  } catch (cause) {
    await handle.close().catch(() => {});
    return {
      ok: false,
      reason: "unreadable",
      path,
      errno: (cause as NodeJS.ErrnoException).code ?? "error",
      cause,
    };
  }
}

/** One sentence saying why a path was refused, naming it (for the caller's message, before its remedy). */
export function describeRefusal(refusal: RegularFileRefusal): string {
  switch (refusal.reason) {
    case "missing":
      return `${refusal.path} does not exist`;
    case "not-a-file":
      return `${refusal.path} is ${refusal.what}, not a regular file`;
    case "too-large":
      return `${refusal.path} is ${refusal.size} bytes, over the ${refusal.maxBytes}-byte limit`;
    case "unreadable":
      return `${refusal.path} cannot be opened (${refusal.errno})`;
    case "grew":
      return `${refusal.path} grew while it was being read`;
  }
}

/**
 * Reads a whole regular file of at most `maxBytes` ({@link openRegularFile}); stops at `maxBytes`
 * + 1 bytes, so a file that grows while read is reported as `grew` rather than read unbounded.
 */
export async function readRegularFile(
  path: string,
  options: { readonly maxBytes: number; readonly noFollow?: boolean },
): Promise<
  { readonly ok: true; readonly bytes: Uint8Array } | ({ readonly ok: false } & RegularFileRefusal)
> {
  const opened = await openRegularFile(path, options);
  if (!opened.ok) return opened;
  const { handle, size } = opened;
  try {
    const buffer = new Uint8Array(size + 1);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled > size) return { ok: false, reason: "grew", path };
    }
    return { ok: true, bytes: buffer.subarray(0, filled) };
  } finally {
    await handle.close();
  }
}
