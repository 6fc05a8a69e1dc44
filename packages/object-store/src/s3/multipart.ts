// S3 multipart upload: parts read into shared buffers, hashed in order, sent concurrently, completed only when the digest matches.
import { createHash } from "node:crypto";
import { ObjectStoreError } from "../errors.js";
import {
  abortError,
  bodyParts,
  DEFAULT_CONCURRENCY,
  digestMismatch,
  effectivePartSize,
} from "../internal/body.js";
import { retrying } from "../internal/remote.js";
import type { ObjectInfo } from "../types.js";
import { type Ctx, objectHeaders, putInfo, type Upload } from "./context.js";
import { sendWire } from "./wire.js";

/** `promise`, or a STORE_ABORTED rejection as soon as `signal` fires (the promise is left to settle). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, subject: string): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(subject, undefined));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(subject, undefined));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Parts are read in order into buffers lent by the store's shared {@link PartBuffers} (so memory
 * stays bounded however many uploads run), hashed in that order for the whole-object digest, and
 * uploaded `concurrency` at a time, unsigned (nothing hashes a part a second time). The
 * upload is completed only when the digest of every byte sent matches; otherwise it is aborted.
 */
export async function multipartPut(ctx: Ctx, upload: Upload): Promise<ObjectInfo> {
  const { key, name, subject, body, size, metadata, options } = upload;
  const partSize = effectivePartSize(size ?? 0, options?.partSize);
  const concurrency = Math.max(1, options?.concurrency ?? DEFAULT_CONCURRENCY);
  const { sdk, client } = await ctx.load();
  // Not cut short by the caller's signal: an upload the server created while its answer was on the
  // way would be left open with no id to abort it by. The signal is honoured right after.
  const creation = options?.timeoutMs === undefined ? undefined : { timeoutMs: options.timeoutMs };
  const created = await retrying(ctx, "start multipart upload of", subject, creation, (abortSignal) =>
    client.send(
      new sdk.CreateMultipartUploadCommand({
        Bucket: ctx.bucket,
        Key: name,
        ...objectHeaders(metadata, options),
      }),
      { abortSignal },
    ),
  );
  const uploadId = created.UploadId;
  if (uploadId === undefined) {
    throw new ObjectStoreError("STORE_REQUEST_FAILED", `put ${subject}: the endpoint returned no UploadId.`, {
      kind: "failed",
      subject,
    });
  }
  // Stops the other workers' requests as soon as one part fails for good.
  const stop = new AbortController();
  const signal = options?.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]);
  const parts: Array<{ PartNumber: number; ETag: string }> = [];
  let sent = 0;
  try {
    if (options?.signal?.aborted) throw abortError(subject, options.signal);
    const hash = createHash("sha256");
    const allocate = (bytes: number) => ctx.parts.acquire(bytes, signal, subject);
    const source = (async function* () {
      for await (const part of bodyParts(body, size, partSize, subject, allocate)) {
        if (signal.aborted) {
          part.discard();
          return;
        }
        hash.update(part.bytes);
        yield part;
      }
    })();
    let nextNumber = 1;
    const worker = async () => {
      for (;;) {
        // Reading the next part can take long (a slow stream): stop waiting as soon as we abort.
        const pending = source.next();
        const next = await untilAborted(pending, signal, subject).catch((error: unknown) => {
          // The part it was waiting for may still arrive: give its buffer back then.
          pending.then(
            (late) => late.value?.discard(),
            () => {},
          );
          throw error;
        });
        if (next.done) return;
        const part = next.value;
        if (signal.aborted) {
          part.discard();
          return;
        }
        const partNumber = nextNumber++;
        const data = part.bytes;
        let etag: string | string[] | undefined;
        try {
          etag = await retrying(
            ctx,
            `upload part ${partNumber} of`,
            subject,
            { signal, timeoutMs: options?.timeoutMs ?? ctx.timeoutMs },
            async (attemptSignal) => {
              const out = await sendWire(ctx.wire, {
                method: "PUT",
                name,
                query: { partNumber: String(partNumber), uploadId },
                body: data,
                signal: attemptSignal,
              });
              return out.headers.etag;
            },
          );
        } catch (error) {
          part.discard();
          throw error;
        }
        part.release();
        if (typeof etag !== "string") {
          throw new ObjectStoreError(
            "STORE_REQUEST_FAILED",
            `put ${subject}: part ${partNumber} was accepted without an ETag.`,
            { kind: "failed", subject },
          );
        }
        parts.push({ PartNumber: partNumber, ETag: etag });
        sent += data.byteLength;
        options?.onProgress?.(sent);
      }
    };
    const results = await Promise.allSettled(
      Array.from({ length: concurrency }, () =>
        worker().catch((error: unknown) => {
          stop.abort();
          throw error;
        }),
      ),
    );
    const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failure !== undefined) {
      if (options?.signal?.aborted) throw abortError(subject, options.signal);
      throw failure.reason;
    }
    const actual = hash.digest("hex");
    if (metadata.sha256 !== undefined && actual !== metadata.sha256) {
      throw digestMismatch(subject, actual, metadata.sha256);
    }
    parts.sort((a, b) => a.PartNumber - b.PartNumber);
    const done = await retrying(ctx, "complete multipart upload of", subject, options, (abortSignal) =>
      client.send(
        new sdk.CompleteMultipartUploadCommand({
          Bucket: ctx.bucket,
          Key: name,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts },
        }),
        { abortSignal },
      ),
    );
    return putInfo(key, size ?? sent, metadata, done.ETag);
  } catch (error) {
    // Best effort: an abandoned upload only costs storage until the bucket's lifecycle rule.
    await client
      .send(new sdk.AbortMultipartUploadCommand({ Bucket: ctx.bucket, Key: name, UploadId: uploadId }), {
        abortSignal: AbortSignal.timeout(ctx.timeoutMs),
      })
      .catch(() => undefined);
    throw error;
  }
}
