import { type SourceWorker, startSourceWorker, WRITE_SLICE_BYTES } from "@ckpt/manifest";
import { HfConversionError } from "../errors.js";

/** Bytes written between two background flushes of a file (its writeback then overlaps the writing). */
const FLUSH_BYTES = 256 * 1024 * 1024;

/** A request to the writing thread; `seq` pairs it with its reply. */
type Request =
  | { type: "open"; seq: number; file: number; path: string }
  | { type: "range"; seq: number; file: number; from: number; length: number }
  | { type: "bytes"; seq: number; file: number; bytes: Uint8Array }
  | { type: "close"; seq: number; file: number }
  | { type: "shutdown"; seq: number };

/** A request before it is numbered (Omit over each member of the union). */
type Unnumbered<R = Request> = R extends unknown ? Omit<R, "seq"> : never;

type Reply = { seq: number; error?: string; errno?: string; size?: number; sha256?: string };

/**
 * The writing thread. For each file: created exclusively; its bytes come as ranges of the source
 * (read, hashed and written through one small buffer, so each piece is still in the core's cache
 * for the hash and the write) or as chunks from the caller; a background fdatasync every
 * FLUSH_BYTES; on close the last flush and an fsync, then the size and digest. A file that fails
 * is closed at once; shutdown closes whatever is still open. Shipped as source text (see
 * @ckpt/manifest's startSourceWorker for why).
 */
function shardWriterThread(
  port: import("node:worker_threads").MessagePort,
  sourcePath: string,
  fs: typeof import("node:fs"),
  createHash: typeof import("node:crypto").createHash,
  sliceBytes: number,
  flushBytes: number,
): void {
  const source = fs.openSync(sourcePath, "r");
  const buffer = Buffer.allocUnsafe(sliceBytes);
  type Open = {
    fd: number;
    path: string;
    hash: ReturnType<typeof createHash>;
    size: number;
    unflushed: number;
    flushing: Promise<void> | undefined;
    /** A background flush's failure, thrown at close: Linux reports it once per open file, so the final fsync would not. */
    flushFailure: Error | undefined;
  };
  const files = new Map<number, Open>();
  const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));
  const flush = (f: Open) =>
    new Promise<void>((resolve) =>
      fs.fdatasync(f.fd, (error) => {
        f.flushFailure ??= error ?? undefined;
        f.flushing = undefined;
        resolve();
      }),
    );
  const write = (f: Open, bytes: Uint8Array) => {
    f.hash.update(bytes);
    for (let done = 0; done < bytes.length; )
      done += fs.writeSync(f.fd, bytes, done, Math.min(sliceBytes, bytes.length - done), f.size + done);
    f.size += bytes.length;
    f.unflushed += bytes.length;
    if (f.unflushed >= flushBytes && f.flushing === undefined) {
      f.unflushed = 0;
      f.flushing = flush(f);
    }
  };
  const drop = async (id: number) => {
    const f = files.get(id);
    files.delete(id);
    if (f === undefined) return;
    await f.flushing;
    fs.closeSync(f.fd);
  };
  port.on("message", async (m: Request) => {
    try {
      if (m.type === "open") {
        files.set(m.file, {
          fd: fs.openSync(m.path, "wx"),
          path: m.path,
          hash: createHash("sha256"),
          size: 0,
          unflushed: 0,
          flushing: undefined,
          flushFailure: undefined,
        });
        port.postMessage({ seq: m.seq });
      } else if (m.type === "range") {
        const f = files.get(m.file)!;
        for (let at = 0; at < m.length; ) {
          const n = fs.readSync(source, buffer, 0, Math.min(sliceBytes, m.length - at), m.from + at);
          if (n === 0) throw new Error(`the source ended ${m.length - at} bytes before a tensor's end`);
          write(f, buffer.subarray(0, n));
          at += n;
        }
        port.postMessage({ seq: m.seq });
      } else if (m.type === "bytes") {
        write(files.get(m.file)!, m.bytes);
        port.postMessage({ seq: m.seq });
      } else if (m.type === "close") {
        // Later requests (the next file) go on meanwhile: this awaits only this file's fsync.
        const f = files.get(m.file)!;
        await f.flushing;
        if (f.flushFailure !== undefined) throw f.flushFailure;
        await new Promise<void>((resolve, reject) => fs.fsync(f.fd, (e) => (e ? reject(e) : resolve())));
        await drop(m.file);
        port.postMessage({ seq: m.seq, size: f.size, sha256: f.hash.digest("hex") });
      } else {
        for (const id of [...files.keys()]) await drop(id);
        fs.closeSync(source);
        port.postMessage({ seq: m.seq });
        port.close();
      }
    } catch (error) {
      if ("file" in m) await drop(m.file).catch(() => {});
      port.postMessage({ seq: m.seq, error: reason(error), errno: (error as { code?: string }).code });
    }
  });
}

// The modules are imported here, in the text, and passed in: a test runner rewrites `import()`
// inside the function's own source.
const WORKER_SOURCE = `"use strict";
(async () => {
  const { parentPort, workerData } = await import("node:worker_threads");
  const fs = await import("node:fs");
  const { createHash } = await import("node:crypto");
  (${shardWriterThread.toString()})(parentPort, workerData, fs, createHash, ${WRITE_SLICE_BYTES}, ${FLUSH_BYTES});
})();
`;

/** One file being written by a {@link ShardWriter}. */
export interface WrittenFile {
  /** Appends `length` bytes of the source file starting at `from`. */
  range(from: number, length: number): Promise<void>;
  /** Appends `bytes`; resolves once they are written, so the caller may reuse the buffer. */
  bytes(bytes: Uint8Array): Promise<void>;
  /** Ends the file: resolves once it is durable, with its size and the digest of what was written. */
  close(): Promise<{ size: number; sha256: string }>;
}

/**
 * Writes the staging directory's files on one thread of their own, reading the copied tensors
 * straight from the source's open file (`sourcePath`, a /proc/self/fd path): each piece is read,
 * hashed and written while it is in the core's cache, with no copy through the caller's thread. A
 * file's final fsync overlaps the next file's writing. Files are created exclusively and written in
 * place, with no temporary and rename: the staging directory as a whole is what appears atomically
 * (the swap), and nothing in it counts before its marker. `shutdown` closes every file and the
 * thread; a failure fails the file it concerns (named in the error) and is reported to its caller.
 */
export class ShardWriter {
  private readonly worker: SourceWorker<Request>;
  private readonly waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  private seq = 0;
  private files = 0;
  private failure: Error | undefined;

  constructor(sourcePath: string) {
    const fail = (cause: Error) => {
      this.failure ??= cause;
      for (const waiter of this.waiting.values()) waiter.reject(cause);
      this.waiting.clear();
    };
    this.worker = startSourceWorker<Request, Reply>(WORKER_SOURCE, sourcePath, {
      onMessage: (reply) => {
        const waiter = this.waiting.get(reply.seq);
        this.waiting.delete(reply.seq);
        waiter?.resolve(reply);
      },
      onEnd: (end) =>
        fail("error" in end ? end.error : new Error(`the writing thread exited with code ${end.exitCode}`)),
    });
  }

  private async call(path: string, request: Unnumbered): Promise<Reply> {
    if (this.failure) throw this.failed(path, this.failure.message);
    const seq = this.seq++;
    const reply = await new Promise<Reply>((resolve, reject) => {
      this.waiting.set(seq, { resolve, reject });
      this.worker.post({ ...request, seq });
    }).catch((error: Error) => {
      throw this.failed(path, error.message);
    });
    if (reply.error !== undefined) throw this.failed(path, reply.error, reply.errno);
    return reply;
  }

  /** The thread's error, keeping its errno as the cause (so a full disk is told from other failures). */
  private failed(path: string, reason: string, errno?: string): HfConversionError {
    return new HfConversionError("MATERIALIZE_BUILD_FAILED", `write ${path}: ${reason}.`, {
      kind: "failed",
      file: path,
      ...(errno === undefined ? {} : { cause: Object.assign(new Error(reason), { code: errno }) }),
    });
  }

  async open(path: string): Promise<WrittenFile> {
    const file = this.files++;
    await this.call(path, { type: "open", file, path });
    return {
      range: async (from, length) => {
        await this.call(path, { type: "range", file, from, length });
      },
      bytes: async (bytes) => {
        await this.call(path, { type: "bytes", file, bytes });
      },
      close: async () => {
        const reply = await this.call(path, { type: "close", file });
        return { size: reply.size!, sha256: reply.sha256! };
      },
    };
  }

  /** Closes every file still open and ends the thread. */
  async shutdown(): Promise<void> {
    if (this.failure === undefined)
      await this.call("the staging directory", { type: "shutdown" }).catch(() => {});
    await this.worker.terminate();
  }
}
