import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import { Readable } from "node:stream";
import { ObjectStoreError } from "../errors.js";
import type { PutBody, PutOptions } from "../types.js";

/** Default size above which a put goes multipart (resumable on GCS). */
export const DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024;
/** Default part size; S3 requires at least 5 MiB for every part but the last. */
export const DEFAULT_PART_SIZE = 16 * 1024 * 1024;
export const MIN_PART_SIZE = 5 * 1024 * 1024;
/** S3's limit on the number of parts of one upload. */
export const MAX_PARTS = 10_000;
export const DEFAULT_CONCURRENCY = 4;

/** Whether a put of `size` bytes goes multipart (above the caller's or the default threshold). */
export function isMultipart(size: number, options: PutOptions | undefined): boolean {
  return size > (options?.multipartThreshold ?? DEFAULT_MULTIPART_THRESHOLD);
}

/** The size of a body in bytes (a file is stat'ed). `subject` names the object in errors. */
export async function bodySize(body: PutBody, subject: string): Promise<number> {
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
export async function openBody(subject: string, body: PutBody): Promise<{ stream: Readable; size: number }> {
  const size = await bodySize(body, subject);
  if (body instanceof Uint8Array) return { stream: Readable.from([Buffer.from(body)]), size };
  if ("path" in body) return { stream: createReadStream(body.path), size };
  return { stream: body.stream, size };
}

/** The error for a body whose byte count differs from what it declared. */
export function sizeMismatch(subject: string, got: number, declared: number): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_INTEGRITY",
    `put ${subject}: the body delivered ${got} bytes but declared ${declared}. Was the source changed while it was read?`,
    { kind: "input", subject },
  );
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
 * The chunks of `stream`, checked on the way: more or fewer bytes than `size` is `STORE_INTEGRITY`,
 * and so is a digest other than `sha256` (thrown after the last chunk, before the loop ends).
 */
export async function* checkedChunks(
  subject: string,
  stream: Readable,
  size: number,
  sha256: string | undefined,
): AsyncGenerator<Uint8Array> {
  const hash = createHash("sha256");
  let got = 0;
  for await (const chunk of stream) {
    const bytes = chunk as Uint8Array;
    got += bytes.byteLength;
    if (got > size) throw sizeMismatch(subject, got, size);
    hash.update(bytes);
    yield bytes;
  }
  if (got !== size) throw sizeMismatch(subject, got, size);
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

/** Read exactly `length` bytes of `path` at `offset` (positioned reads; the file is not seeked). */
async function readRange(path: string, offset: number, length: number, subject: string): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await handle.read(buffer, filled, length - filled, offset + filled);
      if (bytesRead === 0) throw sizeMismatch(subject, offset + filled, offset + length);
      filled += bytesRead;
    }
    return buffer;
  } finally {
    await handle.close();
  }
}

/** Collect a stream into parts of exactly `partSize` bytes (the last may be shorter). */
async function* streamParts(stream: Readable, partSize: number, size: number, subject: string) {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let total = 0;
  for await (const chunk of stream) {
    let data: Buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    total += data.byteLength;
    if (total > size) throw sizeMismatch(subject, total, size);
    while (pendingBytes + data.byteLength >= partSize) {
      const take = partSize - pendingBytes;
      pending.push(data.subarray(0, take));
      yield Buffer.concat(pending, partSize);
      data = data.subarray(take);
      pending = [];
      pendingBytes = 0;
    }
    if (data.byteLength > 0) {
      pending.push(data);
      pendingBytes += data.byteLength;
    }
  }
  if (total !== size) throw sizeMismatch(subject, total, size);
  if (pendingBytes > 0 || size === 0) yield Buffer.concat(pending, pendingBytes);
}

/**
 * The body cut into parts, produced lazily: a file is read part by part with positioned reads and
 * a stream is buffered one part at a time, so memory stays at about (concurrency + 1) parts.
 */
export async function* bodyParts(
  body: PutBody,
  size: number,
  partSize: number,
  subject: string,
): AsyncGenerator<Buffer> {
  if (body instanceof Uint8Array) {
    for (let offset = 0; offset < size || (size === 0 && offset === 0); offset += partSize) {
      yield Buffer.from(body.buffer, body.byteOffset + offset, Math.min(partSize, size - offset));
      if (size === 0) return;
    }
    return;
  }
  if ("path" in body) {
    for (let offset = 0; offset < size; offset += partSize) {
      yield await readRange(body.path, offset, Math.min(partSize, size - offset), subject);
    }
    return;
  }
  yield* streamParts(body.stream, partSize, size, subject);
}

/** The whole body in memory; used for single-request uploads (at most the multipart threshold). */
export async function wholeBody(body: PutBody, size: number, subject: string): Promise<Buffer> {
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if ("path" in body) return size === 0 ? Buffer.alloc(0) : readRange(body.path, 0, size, subject);
  const parts: Buffer[] = [];
  for await (const part of streamParts(body.stream, Math.max(size, 1), size, subject)) parts.push(part);
  return Buffer.concat(parts, size);
}
