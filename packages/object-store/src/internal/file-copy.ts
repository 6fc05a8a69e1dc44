import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import { abortError, digestMismatch, sizeCheck } from "./body.js";
import { type StreamingHash, threadHash } from "./hash-threads.js";

/** Bytes per read: large enough that per-read and per-message costs vanish. */
const CHUNK_BYTES = 4 * 1024 * 1024;
/** Buffers in turn: one being read, one being hashed, one being written, one spare for jitter. */
const MAX_SLOTS = 4;

/** How a file body of `size` bytes is copied. */
export interface CopyPlan {
  /** Bytes of each buffer: one byte at least, so a file that grew from empty is still noticed. */
  readonly chunkBytes: number;
  readonly slots: number;
  /** Where the digest is computed; "none" when none was declared, as there is nothing to check. */
  readonly hashing: "none" | "inline" | "thread";
}

/**
 * The plan for copying `size` bytes. A body of one chunk is hashed on this thread: there is no
 * later read for its hash to overlap, and starting a thread costs more than hashing 4 MiB.
 */
export function copyPlan(size: number, sha256: string | undefined): CopyPlan {
  const chunks = Math.ceil(size / CHUNK_BYTES);
  return {
    chunkBytes: Math.max(1, Math.min(CHUNK_BYTES, size)),
    // The read that finds the end needs a buffer too.
    slots: Math.min(MAX_SLOTS, chunks + 1),
    hashing: sha256 === undefined ? "none" : chunks > 1 ? "thread" : "inline",
  };
}

function inlineHash(): StreamingHash {
  const hash = createHash("sha256");
  return {
    update: async (bytes) => {
      hash.update(bytes);
    },
    digest: async () => hash.digest("hex"),
    discard: () => {},
  };
}

interface Slot {
  readonly bytes: Buffer;
  /** Settles once the chunk last read into `bytes` is hashed and written. */
  busy: Promise<unknown>;
}

/**
 * Copies the file at `path` (declared `size` bytes) to the end of `target`, reading chunk i+1
 * while chunk i is hashed on a thread and written on libuv's pool. A buffer is read into again only
 * once both its hash and its write are done. More or fewer bytes than `size`, or a digest other
 * than `sha256`, is `STORE_INTEGRITY`, thrown before this returns. `onWritten` hears the bytes
 * written so far after each write. On any failure nothing reads or writes the buffers or `target`
 * any more once this rejects.
 */
export async function copyFileChecked(
  subject: string,
  path: string,
  size: number,
  sha256: string | undefined,
  target: { write(bytes: Uint8Array): Promise<unknown> },
  signal: AbortSignal,
  onWritten: (bytes: number) => void,
): Promise<void> {
  const plan = copyPlan(size, sha256);
  const source = await open(path, "r");
  // Shared memory so a hashing thread reads the very bytes this thread read, uncopied.
  const slots: Slot[] = Array.from({ length: plan.slots }, () => ({
    bytes: Buffer.from(new SharedArrayBuffer(plan.chunkBytes)),
    busy: Promise.resolve(),
  }));
  let hash: StreamingHash | undefined;
  let writing: Promise<unknown> = Promise.resolve();
  let got = 0;
  try {
    if (plan.hashing !== "none") hash = plan.hashing === "thread" ? threadHash(subject) : inlineHash();
    for (let turn = 0; ; turn++) {
      if (signal.aborted) throw abortError(subject, signal);
      const slot = slots[turn % slots.length]!;
      await slot.busy;
      const { bytesRead } = await source.read(slot.bytes, 0, slot.bytes.byteLength, got);
      if (bytesRead === 0) break;
      got += bytesRead;
      const overrun = sizeCheck(subject, got, size, false);
      if (overrun !== undefined) throw overrun;
      const chunk = slot.bytes.subarray(0, bytesRead);
      const reached = got;
      writing = writing.then(async () => {
        await target.write(chunk);
        onWritten(reached);
      });
      slot.busy = Promise.all([hash?.update(chunk), writing]);
      // Marked handled: a failure surfaces when the slot is next awaited, turns later, and must not
      // be reported as an unhandled rejection in between.
      slot.busy.catch(() => {});
    }
    await Promise.all(slots.map((slot) => slot.busy));
    const wrongSize = sizeCheck(subject, got, size, true);
    if (wrongSize !== undefined) throw wrongSize;
    const digest = await hash?.digest();
    if (digest !== undefined && digest !== sha256) throw digestMismatch(subject, digest, sha256!);
  } catch (error) {
    await Promise.allSettled(slots.map((slot) => slot.busy));
    hash?.discard();
    throw error;
  } finally {
    await source.close();
  }
}
