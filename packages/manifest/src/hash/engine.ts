import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { ManifestError } from "../errors.js";
import { type HashIo, type HashJob, type HashOutcome, hashPath } from "./core.js";
import { HashWorker } from "./worker.js";

/** Size and SHA-256 (lowercase hex) of one file. */
export interface FileDigest {
  size: number;
  sha256: string;
}

/**
 * Progress of a hashing call. For `bytes`, `bytes` is what was hashed of `path` since the previous
 * event for that path, so the `bytes` of all `bytes` events add up to `totalBytes`. `file-start`
 * carries 0 and `file-done` the file's size.
 */
export interface HashProgressEvent {
  type: "file-start" | "bytes" | "file-done";
  /** The path as the caller gave it (`hashFiles`) or relative POSIX (`hashDirectory`). */
  path: string;
  bytes: number;
  fileSize: number;
  /** Bytes hashed so far by this call, over all files. */
  doneBytes: number;
  /** Bytes this call hashes in all. */
  totalBytes: number;
}

export interface HashOptions {
  signal?: AbortSignal;
  /** Files hashed at once (threads). Default: the available cores, at most 8. */
  concurrency?: number;
  /**
   * Read size of the calling thread's pipelined reads (two reused buffers). Default 4 MiB. Worker
   * threads, used when several files are hashed or one is large (64 MiB+), read 128 KiB at a time
   * whatever this says.
   */
  chunkSize?: number;
  onProgress?: (event: HashProgressEvent) => void;
  /** Minimum time between two `bytes` events of one file (default 100 ms; 0 reports every chunk). */
  progressIntervalMs?: number;
}

/** A file to hash: where to open it, how to name it, and what its size was when it was listed. */
export interface PlannedFile {
  path: string;
  label: string;
  size: number;
  noFollow: boolean;
}

/** Knobs that tests turn; callers get the defaults. */
export interface HashTuning {
  /**
   * Bytes beyond the largest file that make one more worker thread worth starting. A worker costs
   * tens of milliseconds to start here, about what hashing 64 MiB takes.
   */
  workerMinBytes: number;
}

export const DEFAULT_TUNING: HashTuning = { workerMinBytes: 64 * 1024 * 1024 };

const MiB = 1024 * 1024;
const DEFAULT_CHUNK_SIZE = 4 * MiB;
// Below 64 KiB the per-read overhead dominates; above 256 MiB the buffers alone would be a burden.
const MIN_CHUNK_SIZE = 64 * 1024;
const MAX_CHUNK_SIZE = 256 * MiB;
// More threads than this only multiply buffer memory: the disk, not the CPU, is then the limit.
const MAX_DEFAULT_CONCURRENCY = 8;
const MAX_CONCURRENCY = 64;
// Worker threads read synchronously into a buffer this small so it stays in the core's L2 cache
// (see hashPathSync); measured best at 64–128 KiB on our VMs.
const WORKER_READ_SIZE = 128 * 1024;

const nodeIo: HashIo = {
  open,
  createHash,
  flags: { read: constants.O_RDONLY, noFollow: constants.O_NOFOLLOW, nonBlock: constants.O_NONBLOCK },
};

// The main thread's buffers are kept between calls: first-touching fresh memory costs more than
// hashing it on the VMs we measured (docs/performance.md), and many callers hash file by file.
let spareBuffers: [Buffer, Buffer] | undefined;

function takeBuffers(chunkSize: number): [Buffer, Buffer] {
  const spare = spareBuffers;
  if (spare && spare[0].length === chunkSize) {
    spareBuffers = undefined;
    return spare;
  }
  return [Buffer.allocUnsafe(chunkSize), Buffer.allocUnsafe(chunkSize)];
}

function badOption(field: string, message: string): ManifestError {
  return new ManifestError("HASH_BAD_OPTION", message, { kind: "input", field });
}

function resolveOptions(options: HashOptions): {
  concurrency: number;
  chunkSize: number;
  intervalMs: number;
} {
  const concurrency =
    options.concurrency ?? Math.max(1, Math.min(availableParallelism(), MAX_DEFAULT_CONCURRENCY));
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > MAX_CONCURRENCY) {
    throw badOption(
      "concurrency",
      `hash: concurrency ${concurrency} is not an integer from 1 to ${MAX_CONCURRENCY}.`,
    );
  }
  const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  if (!Number.isInteger(chunkSize) || chunkSize < MIN_CHUNK_SIZE || chunkSize > MAX_CHUNK_SIZE) {
    throw badOption(
      "chunkSize",
      `hash: chunkSize ${chunkSize} is not an integer from ${MIN_CHUNK_SIZE} to ${MAX_CHUNK_SIZE} bytes.`,
    );
  }
  const intervalMs = options.progressIntervalMs ?? 100;
  if (!(intervalMs >= 0)) {
    throw badOption("progressIntervalMs", `hash: progressIntervalMs ${intervalMs} is not a number >= 0.`);
  }
  return { concurrency, chunkSize, intervalMs };
}

export function abortedError(subject: string): ManifestError {
  return new ManifestError("HASH_ABORTED", `hash ${subject}: aborted by the caller.`, { kind: "failed" });
}

function outcomeError(outcome: Extract<HashOutcome, { ok: false }>, label: string): ManifestError {
  const file = label;
  switch (outcome.code) {
    case "HASH_FILE_CHANGED":
      return new ManifestError(
        outcome.code,
        `hash ${label}: the file changed while it was being hashed (${outcome.reason}). Hash it again once nothing writes to it.`,
        { kind: "failed", file },
      );
    case "HASH_SYMLINK_REFUSED":
      return new ManifestError(
        outcome.code,
        `hash ${label}: ${outcome.reason}; symbolic links inside a checkpoint are refused so nothing outside it is read. Replace it with the file itself.`,
        { kind: "refused", file },
      );
    case "HASH_SPECIAL_FILE_REFUSED":
      return new ManifestError(
        outcome.code,
        `hash ${label}: ${outcome.reason}; only regular files can be hashed.`,
        { kind: "refused", file },
      );
    case "HASH_ABORTED":
      return abortedError(label);
    case "HASH_READ_FAILED":
      return new ManifestError(
        outcome.code,
        `hash ${label}: ${outcome.reason}. Check that the file exists and is readable.`,
        { kind: "failed", file },
      );
  }
}

/** Turns per-chunk byte counts into throttled, typed progress events. */
class ProgressTracker {
  private doneBytes = 0;
  private readonly reported: number[];
  private readonly pending: number[];
  private readonly lastEmit: number[];

  constructor(
    private readonly files: readonly PlannedFile[],
    private readonly totalBytes: number,
    private readonly intervalMs: number,
    private readonly sink: ((event: HashProgressEvent) => void) | undefined,
  ) {
    this.reported = files.map(() => 0);
    this.pending = files.map(() => 0);
    this.lastEmit = files.map(() => 0);
  }

  get enabled(): boolean {
    return this.sink !== undefined;
  }

  start(index: number): void {
    this.lastEmit[index] = performance.now();
    this.emit("file-start", index, 0);
  }

  bytes(index: number, bytes: number): void {
    this.pending[index]! += bytes;
    const now = performance.now();
    if (now - this.lastEmit[index]! < this.intervalMs) return;
    this.lastEmit[index] = now;
    this.flush(index);
  }

  done(index: number, size: number): void {
    // Workers report by time, so whatever they hashed since their last report is accounted here.
    this.pending[index] = size - this.reported[index]!;
    this.flush(index);
    this.emit("file-done", index, size);
  }

  private flush(index: number): void {
    const bytes = this.pending[index]!;
    if (bytes <= 0) return;
    this.pending[index] = 0;
    this.reported[index]! += bytes;
    this.doneBytes += bytes;
    this.emit("bytes", index, bytes);
  }

  private emit(type: HashProgressEvent["type"], index: number, bytes: number): void {
    const file = this.files[index]!;
    this.sink?.({
      type,
      path: file.label,
      bytes,
      fileSize: file.size,
      doneBytes: this.doneBytes,
      totalBytes: this.totalBytes,
    });
  }
}

/**
 * Hashes `files` (results in the same order) on the calling thread or, when there is enough to
 * share, on worker threads; largest files first so the last file to finish is a small one.
 */
export async function hashPlannedFiles(
  files: readonly PlannedFile[],
  options: HashOptions,
  subject: string,
  tuning: HashTuning = DEFAULT_TUNING,
): Promise<FileDigest[]> {
  const { concurrency, chunkSize, intervalMs } = resolveOptions(options);
  const { signal } = options;
  if (signal?.aborted) throw abortedError(subject);

  const totalBytes = files.reduce((sum, file) => sum + file.size, 0);
  const largest = files.reduce((max, file) => Math.max(max, file.size), 0);
  // More lanes pay only for the bytes beyond the largest file. Lanes are workers whenever there is
  // more than one, or the largest file is big enough to repay a worker's start-up: a worker's small
  // synchronous reads stay in L2 between the copy out of the page cache and the hash (measured: a
  // quarter less CPU per GiB than the calling thread's pipelined 4 MiB reads, on par with openssl).
  // Small single files stay on the calling thread, where a worker's start-up would dominate.
  const lanes = Math.max(
    1,
    Math.min(
      concurrency,
      files.length,
      1 + Math.floor((totalBytes - largest) / Math.max(1, tuning.workerMinBytes)),
    ),
  );
  const workerCount = lanes > 1 || largest >= tuning.workerMinBytes ? lanes : 0;
  const order = files.map((_, index) => index).sort((a, b) => files[b]!.size - files[a]!.size);
  const results: FileDigest[] = new Array(files.length);

  let stopped = false;
  let fail: (error: unknown) => void = () => {};
  const failure = new Promise<never>((_, reject) => {
    fail = (error) => {
      stopped = true;
      reject(error);
    };
  });
  failure.catch(() => undefined); // observed by the race below; this only silences the early-rejection warning
  const { onProgress } = options;
  const progress = new ProgressTracker(
    files,
    totalBytes,
    intervalMs,
    onProgress &&
      ((event) => {
        if (stopped) return;
        try {
          onProgress(event);
        } catch (error) {
          fail(error);
        }
      }),
  );
  const onAbort = () => fail(abortedError(subject));
  signal?.addEventListener("abort", onAbort, { once: true });

  let next = 0;
  const runLane = async (execute: (job: HashJob) => Promise<HashOutcome>) => {
    while (!stopped && next < order.length) {
      const index = order[next++]!;
      const file = files[index]!;
      progress.start(index);
      const outcome = await execute({
        id: index,
        path: file.path,
        expectedSize: file.size,
        noFollow: file.noFollow,
      });
      if (stopped) return;
      if (!outcome.ok) throw outcomeError(outcome, file.label);
      progress.done(index, outcome.size);
      results[index] = { size: outcome.size, sha256: outcome.sha256 };
    }
  };

  const reportMs = progress.enabled ? intervalMs : -1;
  const workers = Array.from(
    { length: workerCount },
    () => new HashWorker(subject, WORKER_READ_SIZE, reportMs, (id, bytes) => progress.bytes(id, bytes)),
  );
  const buffers = workerCount === 0 ? takeBuffers(chunkSize) : undefined;
  const ignoreBytes = () => {};
  const running = buffers
    ? [
        runLane((job) =>
          hashPath(
            nodeIo,
            job,
            buffers,
            progress.enabled ? (bytes) => progress.bytes(job.id, bytes) : ignoreBytes,
            () => stopped,
          ),
        ),
      ]
    : workers.map((worker) => runLane((job) => worker.run(job)));
  try {
    await Promise.race([Promise.all(running), failure]);
    return results;
  } finally {
    stopped = true;
    signal?.removeEventListener("abort", onAbort);
    await Promise.all(workers.map((worker) => worker.terminate()));
    // The main lane stops at its next chunk; its buffers are free for reuse only after that.
    await Promise.allSettled(running);
    if (buffers) spareBuffers = buffers;
  }
}
