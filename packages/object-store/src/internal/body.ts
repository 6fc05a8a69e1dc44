import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { Readable } from "node:stream";
import { ObjectStoreError } from "../errors.js";
import type { PutBody } from "../types.js";

/** A put body as a stream of bytes plus the size it declares (a file is stat'ed). */
export async function openBody(key: string, body: PutBody): Promise<{ stream: Readable; size: number }> {
  if (body instanceof Uint8Array)
    return { stream: Readable.from([Buffer.from(body)]), size: body.byteLength };
  if ("path" in body) {
    let size: number;
    try {
      size = (await stat(body.path)).size;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "unknown error";
      throw new ObjectStoreError("STORE_REQUEST_FAILED", `put ${key}: cannot read ${body.path} (${code}).`, {
        kind: "input",
        subject: key,
      });
    }
    return { stream: createReadStream(body.path), size };
  }
  if (!Number.isSafeInteger(body.size) || body.size < 0) {
    throw new ObjectStoreError(
      "STORE_INTEGRITY",
      `put ${key}: a stream body needs its size as a non-negative integer (got ${body.size}).`,
      { kind: "input", subject: key },
    );
  }
  return { stream: body.stream, size: body.size };
}

/** The error for a body whose byte count differs from what it declared. */
export function sizeMismatch(key: string, got: number, declared: number): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_INTEGRITY",
    `put ${key}: the body delivered ${got} bytes but declared ${declared}. Was the source changed while it was read?`,
    { kind: "input", subject: key },
  );
}

/** The error for a body whose digest differs from the sha256 option. */
export function digestMismatch(key: string, got: string, declared: string): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_INTEGRITY",
    `put ${key}: the body's sha256 is ${got} but the caller declared ${declared}. Nothing was stored.`,
    { kind: "input", subject: key },
  );
}

/** The reason to reject with when `signal` aborted during an operation on `key`. */
export function abortError(key: string, signal: AbortSignal | undefined): ObjectStoreError {
  const reason = signal?.reason;
  if (reason instanceof ObjectStoreError) return reason;
  return new ObjectStoreError("STORE_ABORTED", `${key}: aborted by the caller.`, {
    kind: "failed",
    subject: key,
  });
}
