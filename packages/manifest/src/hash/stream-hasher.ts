import { Worker } from "node:worker_threads";
import { ManifestError } from "../errors.js";

// Source text, for the reason given in worker.ts: no worker file to resolve in any build.
const WORKER_SOURCE = `"use strict";
(async () => {
  const { parentPort } = await import("node:worker_threads");
  const { createHash } = await import("node:crypto");
  const streams = new Map();
  parentPort.on("message", (m) => {
    let hash = streams.get(m.stream);
    if (hash === undefined) {
      hash = createHash("sha256");
      streams.set(m.stream, hash);
    }
    if (m.bytes !== undefined) {
      hash.update(m.bytes);
      parentPort.postMessage({ seq: m.seq });
    } else {
      streams.delete(m.stream);
      parentPort.postMessage({ seq: m.seq, sha256: hash.digest("hex") });
    }
  });
})();
`;

/** One stream's SHA-256, taken on the hasher's thread. */
export interface HashStream {
  /**
   * Adds `bytes`. Resolves once they are hashed, so the caller may then reuse the buffer. Bytes
   * backed by a SharedArrayBuffer are read in place; others are copied to the thread.
   */
  update(bytes: Uint8Array): Promise<void>;
  /** The hex SHA-256 of everything added; the stream is done after this. */
  digest(): Promise<string>;
}

/**
 * SHA-256 of byte streams on one worker thread, fed by the caller as it produces them: a writer
 * hashes what it writes without reading the file back, and without the hash taking its own
 * thread's time. Updates are applied in the order they are made. `close` ends the thread; a
 * hasher left open does not keep the process alive.
 */
export class StreamHasher {
  private readonly worker: Worker;
  private readonly pending = new Map<
    number,
    { resolve: (sha256?: string) => void; reject: (e: Error) => void }
  >();
  private seq = 0;
  private streams = 0;
  private failure: ManifestError | undefined;

  constructor(private readonly subject: string) {
    this.worker = new Worker(WORKER_SOURCE, { eval: true });
    this.worker.unref();
    this.worker.on("message", (message: { seq: number; sha256?: string }) => {
      const waiter = this.pending.get(message.seq);
      this.pending.delete(message.seq);
      waiter?.resolve(message.sha256);
    });
    const fail = (cause: Error) => {
      this.failure ??= new ManifestError(
        "HASH_WORKER_FAILED",
        `hash ${this.subject}: the hashing thread failed: ${cause.message}.`,
        { kind: "failed", cause },
      );
      for (const waiter of this.pending.values()) waiter.reject(this.failure);
      this.pending.clear();
    };
    this.worker.on("error", fail);
    this.worker.on("exit", (code) => fail(new Error(`it exited with code ${code}`)));
  }

  stream(): HashStream {
    const stream = this.streams++;
    return {
      update: async (bytes) => {
        await this.send({ stream, bytes });
      },
      digest: async () => (await this.send({ stream }))!,
    };
  }

  private send(message: { stream: number; bytes?: Uint8Array }): Promise<string | undefined> {
    if (this.failure) return Promise.reject(this.failure);
    const seq = this.seq++;
    return new Promise((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ ...message, seq });
    }).finally(() => {
      if (this.pending.size === 0) this.worker.unref();
    }) as Promise<string | undefined>;
  }

  /** Ends the thread; pending work is abandoned (its promises reject). */
  async close(): Promise<void> {
    this.failure ??= new ManifestError("HASH_WORKER_FAILED", `hash ${this.subject}: the hasher was closed.`, {
      kind: "failed",
    });
    await this.worker.terminate();
  }
}
