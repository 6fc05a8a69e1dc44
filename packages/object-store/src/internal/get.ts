import { PassThrough, Readable } from "node:stream";
import { ObjectStoreError } from "../errors.js";
import type { GetOptions, ObjectInfo } from "../types.js";

type Range = GetOptions["range"];

function badRange(subject: string, why: string): ObjectStoreError {
  return new ObjectStoreError("STORE_INVALID_RANGE", `get ${subject}: ${why}.`, { kind: "input", subject });
}

/** The `STORE_NOT_FOUND` of a get of `subject`, optionally naming the store it is missing from. */
export function noSuchObject(subject: string, store?: string): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_NOT_FOUND",
    `get ${subject}: no such object${store === undefined ? "" : ` in ${store}`}.`,
    { kind: "failed", subject },
  );
}

/** Throws `STORE_INVALID_RANGE` for negative or non-integer bounds and for `end < start`. Pure. */
function validateRange(subject: string, range: Range): void {
  if (range === undefined) return;
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || start < 0) {
    throw badRange(subject, `range start ${start} is not a non-negative integer`);
  }
  if (end !== undefined && (!Number.isSafeInteger(end) || end < start)) {
    throw badRange(subject, `range end ${end} is not an integer at or after the start ${start}`);
  }
}

/**
 * The byte window `[start, end)` a ranged get reads from an object of `size` bytes, following the
 * contract on GetOptions.range: an end past the size is clamped, `start === size` is empty, and
 * negative, non-integer or inverted bounds and a start past the size are `STORE_INVALID_RANGE`. Pure.
 */
export function resolveRange(subject: string, range: Range, size: number): { start: number; end: number } {
  validateRange(subject, range);
  if (range === undefined) return { start: 0, end: size };
  if (range.start > size) throw pastTheEnd(subject, range.start, size);
  return { start: range.start, end: Math.min(range.end ?? size, size) };
}

function pastTheEnd(subject: string, start: number, size: number): ObjectStoreError {
  return badRange(subject, `range start ${start} is past the object's end (${size} bytes)`);
}

/**
 * A ranged get from a remote store, whose Range header is inclusive (so it cannot ask for an empty
 * window) and which answers 416 to a start at or past the end. Both cases are settled by a HEAD,
 * with the same rules as `resolveRange`. `open` requests bytes `first..last` (inclusive; undefined
 * means from the beginning / to the end) and answers "unsatisfiable" for a 416.
 */
export async function remoteGet(
  subject: string,
  range: Range,
  head: () => Promise<ObjectInfo | undefined>,
  open: (first: number | undefined, last: number | undefined) => Promise<Readable | "unsatisfiable">,
): Promise<Readable> {
  validateRange(subject, range);
  if (range === undefined || range.end !== range.start) {
    const opened = await open(range?.start, range?.end === undefined ? undefined : range.end - 1);
    if (opened !== "unsatisfiable") return codedBody(subject, opened);
  }
  const info = await head();
  if (info === undefined) throw noSuchObject(subject);
  const { start, end } = resolveRange(subject, range, info.size);
  if (start !== end) throw pastTheEnd(subject, start, info.size);
  return Readable.from([]);
}

/**
 * The body of a remote get, whose failures while streaming (a connection reset or a stall cut by
 * the socket) reach the reader as a transient `ObjectStoreError` naming the object and how many
 * bytes had arrived, instead of a bare errno the caller cannot classify. A consumer that stops
 * reading early (destroying the returned stream) releases the connection.
 */
function codedBody(subject: string, body: Readable): Readable {
  let received = 0;
  const out = new PassThrough();
  body.on("data", (chunk: Uint8Array) => {
    received += chunk.length;
  });
  body.on("error", (error) => {
    out.destroy(
      error instanceof ObjectStoreError
        ? error
        : new ObjectStoreError(
            "STORE_TRANSIENT",
            `get ${subject}: the connection broke after ${received} bytes (${(error as NodeJS.ErrnoException).code ?? error.message}). Retry: a resumable fetch continues from the bytes that arrived.`,
            { kind: "transient", subject, cause: error },
          ),
    );
  });
  out.once("close", () => {
    if (!body.destroyed) body.destroy();
  });
  body.pipe(out);
  return out;
}
