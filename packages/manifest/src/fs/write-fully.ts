import type { FileHandle } from "node:fs/promises";

/**
 * The largest single write(2). Linux (6.x, ext4) sizes a buffered write's page-cache folios to
 * the write's length, and on a VM whose balloon reports free pages, large folios come from memory
 * the host has taken back: every page costs a fault to touch again. On the 2-core CI machine a
 * 2 GiB copy in 4 MiB writes took 5.5 s, in 128 KiB writes 1.8 s (128 KiB is also what coreutils
 * `cp` uses). See docs/performance.md, "Write size".
 */
export const WRITE_SLICE_BYTES = 128 * 1024;

/**
 * Writes all of `bytes` in writes of at most {@link WRITE_SLICE_BYTES}. With a `position`, the
 * slices are positional and in flight together on the thread pool; without one, they go one after
 * another at the file's current offset (for `O_APPEND` handles). Resolves, or rejects with the
 * first failure, only once no write is still using `bytes`, so the caller may reuse its buffer.
 */
export async function writeFully(handle: FileHandle, bytes: Uint8Array, position?: number): Promise<void> {
  if (position === undefined) {
    for (let at = 0; at < bytes.length; at += WRITE_SLICE_BYTES)
      await writeSlice(handle, bytes.subarray(at, at + WRITE_SLICE_BYTES), null);
    return;
  }
  const slices: Promise<void>[] = [];
  for (let at = 0; at < bytes.length; at += WRITE_SLICE_BYTES)
    slices.push(writeSlice(handle, bytes.subarray(at, at + WRITE_SLICE_BYTES), position + at));
  const failure = (await Promise.allSettled(slices)).find((s) => s.status === "rejected");
  if (failure !== undefined) throw failure.reason;
}

/** One slice, continuing after short writes. */
async function writeSlice(handle: FileHandle, bytes: Uint8Array, position: number | null): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(
      bytes,
      done,
      bytes.length - done,
      position === null ? null : position + done,
    );
    done += bytesWritten;
  }
}
