import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { ObjectStoreError } from "../errors.js";

/** A SHA-256 fed chunk by chunk; `update` resolves once the hash is done reading the chunk. */
export interface StreamingHash {
  update(bytes: Uint8Array): Promise<void>;
  digest(): Promise<string>;
  /** Drops an unfinished hash (a failed put); nothing once `digest` was asked for. */
  discard(): void;
}

type Request =
  | { type: "update"; id: number; buffer: SharedArrayBuffer; offset: number; length: number }
  | { type: "digest"; id: number }
  | { type: "discard"; id: number };

type Done = { ok: true; digest?: string };
type Reply = Done | { ok: false; message: string };

// Started from source text (`eval: true`) as @ckpt/manifest's startSourceWorker does, so vitest
// (TypeScript sources) and both builds load it alike with no worker file to resolve; object-store
// may not import manifest (tools/layers.mjs). It answers every message once, in order. A chunk
// arrives as a SharedArrayBuffer: the thread hashes the reader's memory, nothing is copied.
const WORKER_SOURCE = `"use strict";
(async () => {
  const { parentPort } = await import("node:worker_threads");
  const { createHash } = await import("node:crypto");
  const hashes = new Map();
  const hashOf = (id) => {
    let hash = hashes.get(id);
    if (hash === undefined) hashes.set(id, (hash = createHash("sha256")));
    return hash;
  };
  parentPort.on("message", (request) => {
    try {
      if (request.type === "update") {
        hashOf(request.id).update(new Uint8Array(request.buffer, request.offset, request.length));
        parentPort.postMessage({ ok: true });
      } else if (request.type === "digest") {
        const digest = hashOf(request.id).digest("hex");
        hashes.delete(request.id);
        parentPort.postMessage({ ok: true, digest });
      } else {
        hashes.delete(request.id);
        parentPort.postMessage({ ok: true });
      }
    } catch (error) {
      parentPort.postMessage({ ok: false, message: String(error && error.message ? error.message : error) });
    }
  });
})();
`;

/** Why a hashing thread ended: its error, or its exit code. */
interface ThreadEnd {
  readonly reason: string;
  readonly cause?: unknown;
}

/** The failure of a put (`subject`, its key) whose hash was on a thread that failed. */
function threadFailure(subject: string, end: ThreadEnd): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_REQUEST_FAILED",
    `put ${subject}: its hashing thread failed (${end.reason}); nothing was stored. Retry the put.`,
    { kind: "failed", subject, ...(end.cause === undefined ? {} : { cause: end.cause }) },
  );
}

/** One hashing thread and the replies it owes, oldest first. */
class HashThread {
  private readonly worker: Worker;
  private readonly pending: { resolve: (reply: Reply) => void; reject: (end: ThreadEnd) => void }[] = [];
  private ended: ThreadEnd | undefined;
  /** Hashes started on this thread and not yet finished (to spread puts over threads). */
  streams = 0;

  constructor(private readonly onEnd: (thread: HashThread) => void) {
    this.worker = new Worker(WORKER_SOURCE, { eval: true });
    // Idle threads must not keep the CLI alive; one is ref'ed only while a reply is owed, or the
    // process could exit under a put that awaits nothing but its hash.
    this.worker.unref();
    this.worker.on("message", (reply: Reply) => {
      this.pending.shift()?.resolve(reply);
      if (this.pending.length === 0) this.worker.unref();
    });
    this.worker.on("error", (error) => this.end({ reason: error.message, cause: error }));
    this.worker.on("exit", (code) => this.end({ reason: `it exited with code ${code}` }));
  }

  get dead(): boolean {
    return this.ended !== undefined;
  }

  private end(end: ThreadEnd): void {
    if (this.ended !== undefined) return;
    this.ended = end;
    for (const owed of this.pending.splice(0)) owed.reject(end);
    this.onEnd(this);
  }

  /** Sends `request` for the put of `subject`; a failure names that put. */
  async call(subject: string, request: Request): Promise<Done> {
    if (this.ended !== undefined) throw threadFailure(subject, this.ended);
    const reply = await new Promise<Reply>((resolve, reject) => {
      if (this.pending.length === 0) this.worker.ref();
      this.pending.push({ resolve, reject: (end) => reject(threadFailure(subject, end)) });
      this.worker.postMessage(request);
    });
    if (!reply.ok) throw threadFailure(subject, { reason: reply.message });
    return reply;
  }

  /** Ends the thread as a crash would (tests: a put must fail cleanly and the next one work). */
  async terminate(): Promise<void> {
    await this.worker.terminate();
  }
}

const threads: HashThread[] = [];
let nextId = 0;

/** The thread with the fewest running hashes, starting one while fewer than the pool's size run. */
function pickThread(): HashThread {
  const size = Math.min(2, availableParallelism());
  if (threads.length < size) {
    const thread = new HashThread((ended) => threads.splice(threads.indexOf(ended), 1));
    threads.push(thread);
    return thread;
  }
  return threads.reduce((best, thread) => (thread.streams < best.streams ? thread : best));
}

/** Ends every hashing thread as a crash would; later hashes start new ones. For tests. */
export async function terminateHashThreads(): Promise<void> {
  await Promise.all([...threads].map((thread) => thread.terminate()));
}

/**
 * A SHA-256 run on a hashing thread (at most two, started on first use), so hashing leaves the
 * JavaScript thread free to read and write while it runs. Chunks must be views of a
 * SharedArrayBuffer and stay untouched until their `update` resolves. `subject` (the put's key)
 * is named by a thread's failure.
 */
export function threadHash(subject: string): StreamingHash {
  const thread = pickThread();
  const id = nextId++;
  thread.streams++;
  let open = true;
  const finish = () => {
    if (open) thread.streams--;
    open = false;
  };
  return {
    update: async (bytes) => {
      await thread.call(subject, {
        type: "update",
        id,
        buffer: bytes.buffer as SharedArrayBuffer,
        offset: bytes.byteOffset,
        length: bytes.byteLength,
      });
    },
    digest: async () => {
      finish();
      return (await thread.call(subject, { type: "digest", id })).digest!;
    },
    discard: () => {
      if (!open) return;
      finish();
      if (!thread.dead) thread.call(subject, { type: "discard", id }).catch(() => {});
    },
  };
}
