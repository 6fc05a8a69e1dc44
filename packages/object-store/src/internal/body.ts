import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import { Readable, Transform } from "node:stream";
import { ObjectStoreError } from "../errors.js";
import type { PutBody, PutOptions } from "../types.js";
import type { PartLease } from "./parts.js";

/** Default size above which a put goes multipart (resumable on GCS). */
const DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024;
/** Default part size; S3 requires at least 5 MiB for every part but the last. */
export const DEFAULT_PART_SIZE = 16 * 1024 * 1024;
const MIN_PART_SIZE = 5 * 1024 * 1024;
/** S3's limit on the number of parts of one upload. */
const MAX_PARTS = 10_000;
export const DEFAULT_CONCURRENCY = 4;
/** Bytes per read of a streamed file body: large enough that per-chunk costs vanish. */
const FILE_STREAM_CHUNK = 512 * 1024;

/** Bytes above which a put goes multipart: the caller's threshold or the default. */
export function multipartThreshold(options: PutOptions | undefined): number {
  return options?.multipartThreshold ?? DEFAULT_MULTIPART_THRESHOLD;
}

/** Whether a put of `size` bytes goes multipart (above the caller's or the default threshold). */
export function isMultipart(size: number, options: PutOptions | undefined): boolean {
  return size > multipartThreshold(options);
}

/** The size of a body in bytes (a file is stat'ed; undefined for an unsized stream). `subject` names the object in errors. */
export async function bodySize(body: PutBody, subject: string): Promise<number | undefined> {
  if (body instanceof Uint8Array) return body.byteLength;
  if ("path" in body) {
    try {
      return (await stat(body.path)).size;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "unknown error";
      throw new ObjectStoreError(
        "STORE_REQUEST_FAILED",
        `put ${subject}: cannot read ${body.path} (${code}).`,
        {
          kind: "input",
          subject,
          cause: error,
        },
      );
    }
  }
  if (body.size === undefined) return undefined;
  if (!Number.isSafeInteger(body.size) || body.size < 0) {
    throw new ObjectStoreError(
      "STORE_INTEGRITY",
      `put ${subject}: a stream body needs its size as a non-negative integer (got ${body.size}).`,
      { kind: "input", subject },
    );
  }
  return body.size;
}

/** A put body as a stream of bytes plus the size it declares (a file is stat'ed). */
export async function openBody(
  subject: string,
  body: PutBody,
): Promise<{ stream: Readable; size: number | undefined }> {
  const size = await bodySize(body, subject);
  if (body instanceof Uint8Array) return { stream: Readable.from([Buffer.from(body)]), size };
  if ("path" in body)
    return { stream: createReadStream(body.path, { highWaterMark: FILE_STREAM_CHUNK }), size };
  return { stream: body.stream, size };
}

/** The error for a body whose byte count differs from what it declared. */
function sizeMismatch(subject: string, got: number, declared: number): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_INTEGRITY",
    `put ${subject}: the body delivered ${got} bytes but declared ${declared}. Was the source changed while it was read?`,
    { kind: "input", subject },
  );
}

/**
 * What is wrong with `got` bytes of a body that declared `size` (nothing to check when undefined):
 * more than `size` at any point, or other than `size` once the body `ended`.
 */
export function sizeCheck(
  subject: string,
  got: number,
  size: number | undefined,
  ended: boolean,
): ObjectStoreError | undefined {
  if (size === undefined) return undefined;
  return got > size || (ended && got !== size) ? sizeMismatch(subject, got, size) : undefined;
}

/** The error for a body whose digest differs from the sha256 option. */
export function digestMismatch(subject: string, got: string, declared: string): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_INTEGRITY",
    `put ${subject}: the body's sha256 is ${got} but the caller declared ${declared}. Nothing was stored.`,
    { kind: "input", subject },
  );
}

/**
 * The chunks of `source`, checked on the way: more or fewer bytes than `size` is `STORE_INTEGRITY`,
 * and so is a digest other than `sha256` (thrown after the last chunk, before the loop ends).
 */
export async function* checkedChunks(
  subject: string,
  source: AsyncIterable<Uint8Array>,
  size: number | undefined,
  sha256: string | undefined,
): AsyncGenerator<Uint8Array> {
  const hash = createHash("sha256");
  let got = 0;
  for await (const bytes of source) {
    got += bytes.byteLength;
    const overrun = sizeCheck(subject, got, size, false);
    if (overrun !== undefined) throw overrun;
    hash.update(bytes);
    yield bytes;
  }
  const wrongSize = sizeCheck(subject, got, size, true);
  if (wrongSize !== undefined) throw wrongSize;
  const digest = hash.digest("hex");
  if (sha256 !== undefined && digest !== sha256) throw digestMismatch(subject, digest, sha256);
}

/** The reason to reject with when `signal` aborted during an operation on `subject`. */
export function abortError(subject: string, signal: AbortSignal | undefined): ObjectStoreError {
  const reason = signal?.reason;
  if (reason instanceof ObjectStoreError) return reason;
  return new ObjectStoreError("STORE_ABORTED", `${subject}: aborted by the caller.`, {
    kind: "failed",
    subject,
  });
}

/** The part size to use for `size` bytes: the requested one, raised to fit in MAX_PARTS parts. */
export function effectivePartSize(size: number, requested: number | undefined): number {
  const wanted = Math.max(requested ?? DEFAULT_PART_SIZE, MIN_PART_SIZE);
  return Math.max(wanted, Math.ceil(size / MAX_PARTS));
}

/** Fill `buffer` with the bytes of `path` from `offset` (positioned reads; the file is not seeked). */
async function readInto(path: string, offset: number, buffer: Buffer, subject: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    let filled = 0;
    while (filled < buffer.byteLength) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.byteLength - filled, offset + filled);
      if (bytesRead === 0) throw sizeMismatch(subject, offset + filled, offset + buffer.byteLength);
      filled += bytesRead;
    }
  } finally {
    await handle.close();
  }
}

const asBuffer = (chunk: unknown): Buffer =>
  Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);

/** Where part buffers come from: a store's shared {@link PartBuffers} (or plain allocation). */
export type PartAllocator = (size: number) => Promise<PartLease>;

/** A part that borrows nothing: a view of the caller's bytes. */
function unlent(bytes: Buffer): PartLease {
  return { bytes, release: () => {}, discard: () => {} };
}

/**
 * Collect a stream into parts of exactly `partSize` bytes (the last may be shorter). An unsized
 * stream (`size` undefined) fills whole part buffers and hands out a view of the last one's bytes.
 */
async function* streamParts(
  stream: Readable,
  partSize: number,
  size: number | undefined,
  subject: string,
  allocate: PartAllocator,
): AsyncGenerator<PartLease> {
  let current: PartLease | undefined;
  let filled = 0;
  let yielded = 0;
  let total = 0;
  try {
    for await (const chunk of stream) {
      let data = asBuffer(chunk);
      total += data.byteLength;
      if (size !== undefined && total > size) throw sizeMismatch(subject, total, size);
      while (data.byteLength > 0) {
        current ??= await allocate(size === undefined ? partSize : Math.min(partSize, size - yielded));
        const copied = data.copy(current.bytes, filled);
        filled += copied;
        data = data.subarray(copied);
        if (filled === current.bytes.byteLength) {
          const part = current;
          current = undefined;
          yielded += filled;
          filled = 0;
          yield part;
        }
      }
    }
    if (size !== undefined && total !== size) throw sizeMismatch(subject, total, size);
  } catch (error) {
    current?.discard();
    throw error;
  }
  if (current !== undefined) yield { ...current, bytes: current.bytes.subarray(0, filled) };
  else if (total === 0) yield unlent(Buffer.alloc(0));
}

/**
 * The body cut into parts, produced lazily in order: a file is read part by part with positioned
 * reads and a stream is copied one part at a time, each into a buffer from `allocate`, so memory
 * stays within what the allocator lends. Bytes in memory are cut into views and borrow nothing.
 */
export async function* bodyParts(
  body: PutBody,
  size: number | undefined,
  partSize: number,
  subject: string,
  allocate: PartAllocator,
): AsyncGenerator<PartLease> {
  if (body instanceof Uint8Array) {
    size = body.byteLength;
    for (let offset = 0; offset < size || (size === 0 && offset === 0); offset += partSize) {
      yield unlent(Buffer.from(body.buffer, body.byteOffset + offset, Math.min(partSize, size - offset)));
      if (size === 0) return;
    }
    return;
  }
  if ("path" in body) {
    const fileSize = size ?? (await bodySize(body, subject)) ?? 0;
    for (let offset = 0; offset < fileSize; offset += partSize) {
      const part = await allocate(Math.min(partSize, fileSize - offset));
      try {
        await readInto(body.path, offset, part.bytes, subject);
      } catch (error) {
        part.discard();
        throw error;
      }
      yield part;
    }
    return;
  }
  yield* streamParts(body.stream, partSize, size, subject, allocate);
}

/**
 * The first bytes of an unsized stream, up to `limit`: `ended` when the stream ended within them
 * (the whole body, to send in one request), else a stream of every byte (the held ones first) to
 * send part by part.
 */
export async function holdUpTo(
  stream: Readable,
  limit: number,
): Promise<{ ended: true; bytes: Buffer } | { ended: false; stream: Readable }> {
  const held: Buffer[] = [];
  let total = 0;
  const iterator = stream[Symbol.asyncIterator]();
  for (;;) {
    const next = await iterator.next();
    if (next.done) return { ended: true, bytes: Buffer.concat(held, total) };
    const chunk = asBuffer(next.value);
    held.push(chunk);
    total += chunk.byteLength;
    if (total > limit) {
      const rest = async function* () {
        yield* held;
        for (let more = await iterator.next(); !more.done; more = await iterator.next())
          yield asBuffer(more.value);
      };
      return { ended: false, stream: Readable.from(rest(), { objectMode: false }) };
    }
  }
}

/** The whole body in memory; used for single-request uploads (at most the multipart threshold). */
export async function wholeBody(body: PutBody, size: number, subject: string): Promise<Buffer> {
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if ("path" in body) {
    const bytes = Buffer.allocUnsafe(size);
    if (size > 0) await readInto(body.path, 0, bytes, subject);
    return bytes;
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body.stream) {
    const data = asBuffer(chunk);
    total += data.byteLength;
    if (total > size) throw sizeMismatch(subject, total, size);
    chunks.push(data);
  }
  if (total !== size) throw sizeMismatch(subject, total, size);
  return Buffer.concat(chunks, size);
}

/** A body stream that checks its bytes, and what it found wrong (once it has failed). */
export interface VerifiedStream {
  readonly stream: Readable;
  readonly failure: () => ObjectStoreError | undefined;
}

/**
 * The first `size` bytes of the file at `path`, hashed as they stream. With `sha256`, the last
 * chunk is held back until the digest of all `size` bytes is known, and bytes that differ (the
 * file was rewritten after it was hashed) fail the stream before its final byte: a request that
 * declared `size` as its Content-Length then never completes, so nothing is stored. A file
 * shorter than `size` fails the same way. One read pass serves the upload and the check.
 */
export function verifiedFileStream(
  path: string,
  size: number,
  sha256: string | undefined,
  subject: string,
): VerifiedStream {
  let failure: ObjectStoreError | undefined;
  const fail = (error: ObjectStoreError) => {
    failure = error;
    return error;
  };
  const hash = createHash("sha256");
  let seen = 0;
  const check = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.byteLength;
      hash.update(chunk);
      if (seen < size) {
        done(null, chunk);
        return;
      }
      const digest = hash.digest("hex");
      if (sha256 !== undefined && digest !== sha256) done(fail(digestMismatch(subject, digest, sha256)));
      else done(null, chunk);
    },
    flush(done) {
      if (seen !== size) done(fail(sizeMismatch(subject, seen, size)));
      else done();
    },
  });
  if (size === 0) {
    check.end();
    return { stream: check, failure: () => failure };
  }
  const source = createReadStream(path, { start: 0, end: size - 1, highWaterMark: FILE_STREAM_CHUNK });
  source.once("error", (error) => {
    const code = (error as NodeJS.ErrnoException).code ?? error.message;
    check.destroy(
      fail(
        new ObjectStoreError("STORE_REQUEST_FAILED", `put ${subject}: cannot read ${path} (${code}).`, {
          kind: "input",
          subject,
          cause: error,
        }),
      ),
    );
  });
  check.once("close", () => {
    if (!source.destroyed) source.destroy();
  });
  source.pipe(check);
  return { stream: check, failure: () => failure };
}
