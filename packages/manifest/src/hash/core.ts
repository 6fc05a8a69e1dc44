import type { createHash } from "node:crypto";
import type { closeSync, fstatSync, openSync, readSync } from "node:fs";
import type { open } from "node:fs/promises";

/** The failures the hashing loop reports as data, mapped to ManifestError codes by the caller. */
type HashFailureCode =
  | "HASH_READ_FAILED"
  | "HASH_FILE_CHANGED"
  | "HASH_SYMLINK_REFUSED"
  | "HASH_SPECIAL_FILE_REFUSED"
  | "HASH_ABORTED";

export type HashOutcome =
  | { ok: true; size: number; sha256: string }
  | { ok: false; code: HashFailureCode; reason: string };

export interface HashJob {
  id: number;
  /** Absolute or caller-relative path to open. */
  path: string;
  /** Size seen before scheduling; a different size at open time means the file changed. */
  expectedSize: number;
  /** Open with O_NOFOLLOW so a file swapped for a symlink after the directory walk is refused. */
  noFollow: boolean;
}

/** Everything `hashPath` touches, passed in because the function also runs as worker source text. */
export interface HashIo {
  open: typeof open;
  createHash: typeof createHash;
  flags: { read: number; noFollow: number; nonBlock: number };
}

/**
 * Hashes one file with two reused buffers: the read of chunk i+1 (libuv thread pool) overlaps the
 * hashing of chunk i. Reusing buffers matters most: fresh memory is slow to first-touch on the VMs
 * we run on (docs/performance.md).
 *
 * This function is also shipped to worker threads as source text (`hashPath.toString()`), so it
 * must reference nothing but its parameters and JavaScript/Node globals, and returns plain data.
 */
export async function hashPath(
  io: HashIo,
  job: HashJob,
  buffers: readonly [Buffer, Buffer],
  onBytes: (bytes: number) => void,
  shouldStop: () => boolean,
): Promise<HashOutcome> {
  const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
  // O_NONBLOCK keeps a FIFO swapped in after the pre-check from blocking open(); it does not
  // change reads of regular files.
  const flags = io.flags.read | io.flags.nonBlock | (job.noFollow ? io.flags.noFollow : 0);
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await io.open(job.path, flags);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (job.noFollow && code === "ELOOP") {
      return { ok: false, code: "HASH_SYMLINK_REFUSED", reason: "it is a symbolic link" };
    }
    return { ok: false, code: "HASH_READ_FAILED", reason: reasonOf(error) };
  }
  let pending: Promise<{ bytesRead: number }> | undefined;
  try {
    const before = await handle.stat({ bigint: true });
    if (!before.isFile()) {
      return { ok: false, code: "HASH_SPECIAL_FILE_REFUSED", reason: "it is not a regular file" };
    }
    const size = Number(before.size);
    if (size !== job.expectedSize) {
      return {
        ok: false,
        code: "HASH_FILE_CHANGED",
        reason: `its size went from ${job.expectedSize} to ${size} bytes`,
      };
    }
    const hash = io.createHash("sha256");
    const chunk = buffers[0].length;
    let position = 0;
    let which = 0;
    pending = handle.read(buffers[0], 0, chunk, 0);
    for (;;) {
      const { bytesRead } = await pending;
      pending = undefined;
      if (bytesRead === 0) break;
      if (shouldStop()) return { ok: false, code: "HASH_ABORTED", reason: "aborted by the caller" };
      const current = buffers[which]!;
      which ^= 1;
      position += bytesRead;
      // Reading on until a read returns 0 (rather than stopping at `size`) detects growth.
      pending = handle.read(buffers[which]!, 0, chunk, position);
      hash.update(bytesRead === chunk ? current : current.subarray(0, bytesRead));
      onBytes(bytesRead);
    }
    const after = await handle.stat({ bigint: true });
    if (position !== size || after.size !== before.size || after.mtimeNs !== before.mtimeNs) {
      return {
        ok: false,
        code: "HASH_FILE_CHANGED",
        reason: `it was ${size} bytes when opened, ${position} bytes were read and it is ${after.size} bytes now`,
      };
    }
    return { ok: true, size, sha256: hash.digest("hex") };
  } catch (error) {
    return { ok: false, code: "HASH_READ_FAILED", reason: reasonOf(error) };
  } finally {
    // A read still in flight would land in a buffer the next job reuses: wait for it first.
    if (pending) await pending.catch(() => undefined);
    await handle.close().catch(() => undefined);
  }
}

/** The synchronous calls `hashPathSync` makes, passed in for the same reason as `HashIo`. */
export interface HashSyncIo {
  openSync: typeof openSync;
  fstatSync: typeof fstatSync;
  readSync: typeof readSync;
  closeSync: typeof closeSync;
  createHash: typeof createHash;
  flags: HashIo["flags"];
}

/**
 * The worker-thread variant of `hashPath`: synchronous reads into one small buffer on the hashing
 * thread itself. A worker may block, and a buffer that stays in the core's L2 cache makes the copy
 * out of the page cache cheap: on our VMs 128 KiB reads cost a third of the kernel time of 4 MiB
 * reads, and two such workers outrun two pipelined ones (docs/performance.md). Also shipped as
 * source text, under the same constraints as `hashPath`.
 */
export function hashPathSync(
  io: HashSyncIo,
  job: HashJob,
  buffer: Buffer,
  onBytes: (bytes: number) => void,
): HashOutcome {
  const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
  const flags = io.flags.read | io.flags.nonBlock | (job.noFollow ? io.flags.noFollow : 0);
  let fd: number;
  try {
    fd = io.openSync(job.path, flags);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (job.noFollow && code === "ELOOP") {
      return { ok: false, code: "HASH_SYMLINK_REFUSED", reason: "it is a symbolic link" };
    }
    return { ok: false, code: "HASH_READ_FAILED", reason: reasonOf(error) };
  }
  try {
    const before = io.fstatSync(fd, { bigint: true });
    if (!before.isFile()) {
      return { ok: false, code: "HASH_SPECIAL_FILE_REFUSED", reason: "it is not a regular file" };
    }
    const size = Number(before.size);
    if (size !== job.expectedSize) {
      return {
        ok: false,
        code: "HASH_FILE_CHANGED",
        reason: `its size went from ${job.expectedSize} to ${size} bytes`,
      };
    }
    const hash = io.createHash("sha256");
    let position = 0;
    for (;;) {
      const bytesRead = io.readSync(fd, buffer, 0, buffer.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      hash.update(bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead));
      onBytes(bytesRead);
    }
    const after = io.fstatSync(fd, { bigint: true });
    if (position !== size || after.size !== before.size || after.mtimeNs !== before.mtimeNs) {
      return {
        ok: false,
        code: "HASH_FILE_CHANGED",
        reason: `it was ${size} bytes when opened, ${position} bytes were read and it is ${after.size} bytes now`,
      };
    }
    return { ok: true, size, sha256: hash.digest("hex") };
  } catch (error) {
    return { ok: false, code: "HASH_READ_FAILED", reason: reasonOf(error) };
  } finally {
    try {
      io.closeSync(fd);
    } catch {
      // Closing a descriptor opened for reading cannot lose data; the outcome stands.
    }
  }
}
