import { ManifestError } from "../errors.js";
import { type SourceWorker, startSourceWorker } from "../worker/source-worker.js";
import { type HashJob, type HashOutcome, hashPathSync } from "./core.js";

/** Messages a hashing worker posts back. */
type WorkerMessage =
  | { type: "bytes"; id: number; bytes: number }
  | { type: "done"; id: number; outcome: HashOutcome };

// Source text for startSourceWorker (which says why). `import()` works whether Node evaluates it as
// a script or as a module (a parent started with --input-type=module passes that on).
const WORKER_SOURCE = `"use strict";
const hashPathSync = ${hashPathSync.toString()};
(async () => {
  const { parentPort, workerData } = await import("node:worker_threads");
  const { createHash } = await import("node:crypto");
  const fs = await import("node:fs");
  const { constants } = fs;
  const io = {
    openSync: fs.openSync,
    fstatSync: fs.fstatSync,
    readSync: fs.readSync,
    closeSync: fs.closeSync,
    createHash,
    flags: { read: constants.O_RDONLY, noFollow: constants.O_NOFOLLOW, nonBlock: constants.O_NONBLOCK },
  };
  const { readSize, reportMs } = workerData;
  const buffer = Buffer.allocUnsafe(readSize);
  parentPort.on("message", (job) => {
    let unreported = 0;
    let last = Date.now();
    const onBytes = (bytes) => {
      if (reportMs < 0) return;
      unreported += bytes;
      const now = Date.now();
      if (now - last < reportMs) return;
      parentPort.postMessage({ type: "bytes", id: job.id, bytes: unreported });
      unreported = 0;
      last = now;
    };
    const outcome = hashPathSync(io, job, buffer, onBytes);
    parentPort.postMessage({ type: "done", id: job.id, outcome });
  });
})();
`;

/**
 * One hashing worker thread. It hashes one job at a time; `run` resolves with the outcome. Bytes
 * hashed but not yet reported by a `bytes` message are left for the caller to account at `done`.
 */
export class HashWorker {
  private readonly worker: SourceWorker<HashJob>;
  private current:
    | { id: number; resolve: (outcome: HashOutcome) => void; reject: (error: Error) => void }
    | undefined;
  private failure: ManifestError | undefined;

  constructor(
    subject: string,
    readSize: number,
    reportMs: number,
    onBytes: (id: number, bytes: number) => void,
  ) {
    const fail = (cause: Error) => {
      const error = new ManifestError(
        "HASH_WORKER_FAILED",
        `hash ${subject}: a hashing thread failed: ${cause.message}.`,
        { kind: "failed", cause },
      );
      this.failure ??= error;
      const current = this.current;
      this.current = undefined;
      current?.reject(error);
    };
    this.worker = startSourceWorker<HashJob, WorkerMessage>(
      WORKER_SOURCE,
      { readSize, reportMs },
      {
        onMessage: (message) => {
          if (message.type === "bytes") {
            onBytes(message.id, message.bytes);
            return;
          }
          const current = this.current;
          this.current = undefined;
          current?.resolve(message.outcome);
        },
        onEnd: (end) => fail("error" in end ? end.error : new Error(`it exited with code ${end.exitCode}`)),
      },
    );
  }

  run(job: HashJob): Promise<HashOutcome> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.current = { id: job.id, resolve, reject };
      this.worker.post(job);
    });
  }

  async terminate(): Promise<void> {
    this.failure ??= new ManifestError("HASH_ABORTED", "hash: the hashing thread was stopped.", {
      kind: "failed",
    });
    await this.worker.terminate();
  }
}
