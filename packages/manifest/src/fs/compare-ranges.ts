import { ManifestError } from "../errors.js";
import { startSourceWorker } from "../worker/source-worker.js";

/** `length` bytes at offset `a` of one file and at offset `b` of the other. */
export interface RangePair {
  readonly a: number;
  readonly b: number;
  readonly length: number;
}

/**
 * Compares pairs of ranges. Synchronous reads into two small buffers, so both sides are still in
 * the core's cache when compared (the same reason the hashing workers read 128 KiB at a time).
 * Shipped to the worker as source text, like the hashing code.
 */
function comparePairsSync(
  fs: {
    openSync(path: string, flags: number): number;
    readSync(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number;
    closeSync(fd: number): void;
  },
  pathA: string,
  pathB: string,
  pairs: readonly RangePair[],
  bufferA: Uint8Array,
  bufferB: Uint8Array,
): { differing: { index: number; at: number }[]; bytes: number } {
  const fill = (fd: number, buffer: Uint8Array, length: number, position: number) => {
    let done = 0;
    while (done < length) {
      const n = fs.readSync(fd, buffer, done, length - done, position + done);
      if (n === 0) break;
      done += n;
    }
    return done;
  };
  const fdA = fs.openSync(pathA, 0);
  try {
    const fdB = fs.openSync(pathB, 0);
    try {
      const differing: { index: number; at: number }[] = [];
      let bytes = 0;
      for (const [index, pair] of pairs.entries()) {
        for (let at = 0; at < pair.length; at += bufferA.length) {
          const length = Math.min(bufferA.length, pair.length - at);
          // A short read (a file shorter than the range) differs where the shorter side ends.
          const got = Math.min(
            fill(fdA, bufferA, length, pair.a + at),
            fill(fdB, bufferB, length, pair.b + at),
          );
          if (
            got === length &&
            Buffer.compare(bufferA.subarray(0, length), bufferB.subarray(0, length)) === 0
          ) {
            bytes += length;
            continue;
          }
          let first = 0;
          while (first < got && bufferA[first] === bufferB[first]) first++;
          differing.push({ index, at: at + first });
          break;
        }
      }
      return { differing, bytes };
    } finally {
      fs.closeSync(fdB);
    }
  } finally {
    fs.closeSync(fdA);
  }
}

const READ_BYTES = 128 * 1024;

const WORKER_SOURCE = `"use strict";
const comparePairsSync = ${comparePairsSync.toString()};
(async () => {
  const { parentPort, workerData } = await import("node:worker_threads");
  const fs = await import("node:fs");
  const { pathA, pathB, pairs } = workerData;
  try {
    const result = comparePairsSync(fs, pathA, pathB, pairs, Buffer.allocUnsafe(${READ_BYTES}), Buffer.allocUnsafe(${READ_BYTES}));
    parentPort.postMessage({ ok: true, ...result });
  } catch (error) {
    parentPort.postMessage({ ok: false, reason: error instanceof Error ? error.message : String(error) });
  }
})();
`;

/** What {@link compareFileRanges} found. */
export interface RangeComparison {
  /** The pairs whose bytes differ (or could not be read whole): index, and offset of the first difference. */
  readonly differing: readonly { readonly index: number; readonly at: number }[];
  /** Bytes found equal. */
  readonly bytes: number;
}

/**
 * Compares each pair's range of `pathA` with its range of `pathB`, bit for bit, on a worker thread
 * (a path may be `/proc/self/fd/N`, to read a file this process has open). Resolves with the pairs
 * that differ; rejects with `FILE_COMPARE_FAILED` when a file cannot be opened or read.
 */
export function compareFileRanges(
  pathA: string,
  pathB: string,
  pairs: readonly RangePair[],
): Promise<RangeComparison> {
  const fail = (reason: string, cause?: unknown) =>
    new ManifestError("FILE_COMPARE_FAILED", `compare ${pathA} with ${pathB}: ${reason}.`, {
      kind: "failed",
      file: pathB,
      cause,
    });
  if (pairs.length === 0) return Promise.resolve({ differing: [], bytes: 0 });
  // The thread posts one reply and exits; a promise settles once, so the exit after a reply (or
  // after an error) changes nothing.
  return new Promise((resolve, reject) => {
    startSourceWorker<never, { ok: boolean; reason?: string } & RangeComparison>(
      WORKER_SOURCE,
      { pathA, pathB, pairs: pairs.map(({ a, b, length }) => ({ a, b, length })) },
      {
        onMessage: (message) => {
          if (message.ok) resolve({ differing: message.differing, bytes: message.bytes });
          else reject(fail(message.reason!));
        },
        onEnd: (end) =>
          reject(
            "error" in end
              ? fail(`the comparing thread failed: ${end.error.message}`, end.error)
              : fail(`the comparing thread exited with code ${end.exitCode}`),
          ),
      },
    );
  });
}
