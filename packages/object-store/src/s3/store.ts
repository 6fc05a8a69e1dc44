import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { isTransientStoreError, ObjectStoreError } from "../errors.js";
import { joinPrefix, validateKey, validateListPrefix } from "../internal/keys.js";
import { digestMismatch } from "../internal/body.js";
import { infoMetadata, putMetadata } from "../internal/put-options.js";
import { withRetry } from "../internal/retry.js";
import type {
  CallOptions,
  CreateResult,
  DestinationIdentity,
  GetOptions,
  ListOptions,
  ObjectInfo,
  ObjectStore,
  PutBody,
  PutOptions,
  StoreCredentials,
} from "../types.js";
import {
  bodyParts,
  bodySize,
  DEFAULT_CONCURRENCY,
  DEFAULT_MULTIPART_THRESHOLD,
  effectivePartSize,
  wholeBody,
} from "./body.js";
import { makeS3Client, resolveS3Endpoint, type S3Dialect } from "./client.js";
import { errorNameOf, httpStatusOf, isNotFound, isPreconditionFailed, toStoreError } from "./errors.js";
import { gcsConditionalPut } from "./gcs-xml.js";

/** Retry tuning shared by the S3 and GCS backends (see `withRetry`). */
export interface StoreRetryOptions {
  readonly retries?: number;
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Injectable wait, for tests. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface S3StoreOptions {
  readonly bucket: string;
  /** Key prefix below the bucket; leading and trailing slashes are ignored. */
  readonly prefix: string;
  /** The seeds' credentials file contents; without it the SDK's default provider chain is used. */
  readonly credentials?: StoreCredentials;
  /** Endpoint URL; defaults to the credentials' `endpoint_url`, then AWS_ENDPOINT_URL(_S3). */
  readonly endpoint?: string;
  readonly region?: string;
  readonly retry?: StoreRetryOptions;
  /** Per-attempt timeout of each request in milliseconds (default 120 000). */
  readonly timeoutMs?: number;
  /** A ready client (its endpoint should match `endpoint`, which names the destination). */
  readonly client?: S3Client;
  /** Overrides the dialect detected from the endpoint host (`storage.googleapis.com` means gcs). */
  readonly dialect?: S3Dialect;
  /** Environment consulted for the endpoint and region (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Clock for request signing (default `() => new Date()`). */
  readonly now?: () => Date;
}

/** Default per-attempt timeout; a 16 MiB part at 1 MiB/s still fits. */
const DEFAULT_TIMEOUT_MS = 120_000;

/** The full object name of `key` below the store prefix, after validating the key. */
function objectName(ctx: Ctx, key: string): string {
  validateKey(key);
  return joinPrefix(ctx.prefix, key);
}

interface Ctx {
  readonly client: S3Client;
  readonly bucket: string;
  readonly prefix: string;
  readonly uri: string;
  readonly dialect: S3Dialect;
  readonly endpoint: string | undefined;
  readonly region: string;
  readonly retry: StoreRetryOptions;
  readonly timeoutMs: number;
  readonly now: () => Date;
}

/** Run one request with retries; `request` gets an AbortSignal to hand to the SDK. */
function retrying<T>(
  ctx: Ctx,
  action: string,
  subject: string,
  call: CallOptions | undefined,
  request: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  return withRetry(
    async (_attempt, signal) => {
      try {
        return await request(signal);
      } catch (error) {
        throw toStoreError(error, action, subject);
      }
    },
    {
      ...ctx.retry,
      isTransient: isTransientStoreError,
      subject,
      timeoutMs: call?.timeoutMs ?? ctx.timeoutMs,
      ...(call?.signal === undefined ? {} : { signal: call.signal }),
    },
  );
}

function infoFromHead(
  key: string,
  head: {
    ContentLength?: number;
    ETag?: string;
    LastModified?: Date;
    Metadata?: Record<string, string>;
  },
): ObjectInfo {
  return {
    key,
    size: head.ContentLength ?? 0,
    ...infoMetadata(head.Metadata ?? {}),
    ...(head.ETag === undefined ? {} : { etag: head.ETag }),
    ...(head.LastModified === undefined ? {} : { lastModified: head.LastModified }),
  };
}

function putInfo(key: string, size: number, metadata: Record<string, string>, etag?: string): ObjectInfo {
  return { key, size, ...infoMetadata(metadata), ...(etag === undefined ? {} : { etag }) };
}

async function head(ctx: Ctx, key: string, call?: CallOptions): Promise<ObjectInfo | undefined> {
  const name = objectName(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  return retrying(ctx, "head", subject, call, async (abortSignal) => {
    try {
      const out = await ctx.client.send(new HeadObjectCommand({ Bucket: ctx.bucket, Key: name }), {
        abortSignal,
      });
      return infoFromHead(key, out);
    } catch (error) {
      if (isNotFound(error) && errorNameOf(error) !== "NoSuchBucket") return undefined;
      throw error;
    }
  });
}

async function createIfAbsent(
  ctx: Ctx,
  key: string,
  body: Uint8Array,
  options: PutOptions | undefined,
): Promise<CreateResult> {
  const name = objectName(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  const metadata = putMetadata(subject, options);
  const outcome = await retrying(ctx, "create", subject, options, async (abortSignal) => {
    try {
      if (ctx.dialect === "gcs") {
        const credentials = await ctx.client.config.credentials();
        const result = await gcsConditionalPut({
          endpoint: ctx.endpoint ?? "https://storage.googleapis.com",
          bucket: ctx.bucket,
          key: name,
          body,
          ...(options?.contentType === undefined ? {} : { contentType: options.contentType }),
          metadata,
          credentials,
          region: ctx.region,
          now: ctx.now(),
          signal: abortSignal,
        });
        return { created: true as const, etag: result.etag };
      }
      const out = await ctx.client.send(
        new PutObjectCommand({
          Bucket: ctx.bucket,
          Key: name,
          Body: body,
          ContentLength: body.byteLength,
          IfNoneMatch: "*",
          Metadata: metadata,
          ...(options?.contentType === undefined ? {} : { ContentType: options.contentType }),
        }),
        { abortSignal },
      );
      return { created: true as const, etag: out.ETag };
    } catch (error) {
      if (isPreconditionFailed(error)) return { created: false as const };
      const status = httpStatusOf(error);
      if (status === 501 || errorNameOf(error) === "NotImplemented") {
        throw new ObjectStoreError(
          "STORE_CONDITIONAL_UNSUPPORTED",
          `create ${subject}: the endpoint does not support conditional writes (HTTP ${status ?? "?"} ${errorNameOf(error)}). ` +
            "Refusing to write without a create-once guarantee; use an endpoint that enforces " +
            (ctx.dialect === "gcs" ? "x-goog-if-generation-match." : "If-None-Match: *."),
          { kind: "refused", subject, cause: error },
        );
      }
      throw error;
    }
  });
  if (outcome.created) {
    options?.onProgress?.(body.byteLength);
    return { status: "created", info: putInfo(key, body.byteLength, metadata, outcome.etag) };
  }
  const existing = await head(ctx, key, options);
  if (existing !== undefined) return { status: "exists", info: existing };
  throw new ObjectStoreError(
    "STORE_PRECONDITION_UNCONFIRMED",
    `create ${subject}: the endpoint answered 412 Precondition Failed but a HEAD finds no object. ` +
      "A 412 alone does not prove the object exists; retry, and qualify the endpoint with `ckpt doctor store`.",
    { kind: "transient", subject },
  );
}

async function singlePut(
  ctx: Ctx,
  key: string,
  name: string,
  body: PutBody,
  size: number,
  metadata: Record<string, string>,
  options: PutOptions | undefined,
): Promise<ObjectInfo> {
  const subject = `${ctx.uri}/${key}`;
  // A file is streamed afresh on every attempt; other bodies are held once (at most the threshold).
  const held =
    typeof body === "object" && "path" in body && size > 0 ? undefined : await wholeBody(body, size, subject);
  if (metadata.sha256 !== undefined) {
    const hash = createHash("sha256");
    if (held !== undefined) hash.update(held);
    else
      for await (const chunk of createReadStream((body as { path: string }).path))
        hash.update(chunk as Buffer);
    const actual = hash.digest("hex");
    if (actual !== metadata.sha256) throw digestMismatch(subject, actual, metadata.sha256);
  }
  const out = await retrying(ctx, "put", subject, options, (abortSignal) =>
    ctx.client.send(
      new PutObjectCommand({
        Bucket: ctx.bucket,
        Key: name,
        Body: held ?? createReadStream((body as { path: string }).path, { start: 0, end: size - 1 }),
        ContentLength: size,
        Metadata: metadata,
        ...(options?.contentType === undefined ? {} : { ContentType: options.contentType }),
      }),
      { abortSignal },
    ),
  );
  options?.onProgress?.(size);
  return putInfo(key, size, metadata, out.ETag);
}

/** `promise`, or a STORE_ABORTED rejection as soon as `signal` fires (the promise is left to settle). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, subject: string): Promise<T> {
  if (signal.aborted) return Promise.reject(abortedPut(subject));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortedPut(subject));
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

function abortedPut(subject: string): ObjectStoreError {
  return new ObjectStoreError("STORE_ABORTED", `put ${subject}: aborted by the caller.`, { subject });
}

async function multipartPut(
  ctx: Ctx,
  key: string,
  name: string,
  body: PutBody,
  size: number,
  metadata: Record<string, string>,
  options: PutOptions | undefined,
): Promise<ObjectInfo> {
  const subject = `${ctx.uri}/${key}`;
  const partSize = effectivePartSize(size, options?.partSize);
  const concurrency = Math.max(1, options?.concurrency ?? DEFAULT_CONCURRENCY);
  const created = await retrying(ctx, "start multipart upload of", subject, options, (abortSignal) =>
    ctx.client.send(
      new CreateMultipartUploadCommand({
        Bucket: ctx.bucket,
        Key: name,
        Metadata: metadata,
        ...(options?.contentType === undefined ? {} : { ContentType: options.contentType }),
      }),
      { abortSignal },
    ),
  );
  const uploadId = created.UploadId;
  if (uploadId === undefined) {
    throw new ObjectStoreError("STORE_REQUEST_FAILED", `put ${subject}: the endpoint returned no UploadId.`, {
      subject,
    });
  }
  // Stops the other workers' requests as soon as one part fails for good.
  const stop = new AbortController();
  const signal = options?.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]);
  const parts: Array<{ PartNumber: number; ETag: string }> = [];
  let sent = 0;
  try {
    const hash = createHash("sha256");
    const source = (async function* () {
      for await (const part of bodyParts(body, size, partSize, subject)) {
        hash.update(part);
        yield part;
      }
    })();
    let nextNumber = 1;
    const worker = async () => {
      for (;;) {
        // Reading the next part can take long (a slow stream): stop waiting as soon as we abort.
        const next = await untilAborted(source.next(), signal, subject);
        if (next.done || signal.aborted) return;
        const partNumber = nextNumber++;
        const data = next.value;
        const out = await retrying(
          ctx,
          `upload part ${partNumber} of`,
          subject,
          { signal, timeoutMs: options?.timeoutMs ?? ctx.timeoutMs },
          (abortSignal) =>
            ctx.client.send(
              new UploadPartCommand({
                Bucket: ctx.bucket,
                Key: name,
                UploadId: uploadId,
                PartNumber: partNumber,
                Body: data,
                ContentLength: data.byteLength,
              }),
              { abortSignal },
            ),
        );
        if (out.ETag === undefined) {
          throw new ObjectStoreError(
            "STORE_REQUEST_FAILED",
            `put ${subject}: part ${partNumber} was accepted without an ETag.`,
            { subject },
          );
        }
        parts.push({ PartNumber: partNumber, ETag: out.ETag });
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
      if (options?.signal?.aborted) throw abortedPut(subject);
      throw failure.reason;
    }
    const actual = hash.digest("hex");
    if (metadata.sha256 !== undefined && actual !== metadata.sha256) {
      throw digestMismatch(subject, actual, metadata.sha256);
    }
    parts.sort((a, b) => a.PartNumber - b.PartNumber);
    const done = await retrying(ctx, "complete multipart upload of", subject, options, (abortSignal) =>
      ctx.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: ctx.bucket,
          Key: name,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts },
        }),
        { abortSignal },
      ),
    );
    return putInfo(key, size, metadata, done.ETag);
  } catch (error) {
    // Best effort: an abandoned upload only costs storage until the bucket's lifecycle rule.
    await ctx.client
      .send(new AbortMultipartUploadCommand({ Bucket: ctx.bucket, Key: name, UploadId: uploadId }), {
        abortSignal: AbortSignal.timeout(ctx.timeoutMs),
      })
      .catch(() => undefined);
    throw error;
  }
}

async function put(
  ctx: Ctx,
  key: string,
  body: PutBody,
  options: PutOptions | undefined,
): Promise<ObjectInfo> {
  const name = objectName(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  const metadata = putMetadata(subject, options);
  const size = await bodySize(body, subject);
  const threshold = options?.multipartThreshold ?? DEFAULT_MULTIPART_THRESHOLD;
  return size <= threshold
    ? singlePut(ctx, key, name, body, size, metadata, options)
    : multipartPut(ctx, key, name, body, size, metadata, options);
}

function badRange(subject: string, why: string): ObjectStoreError {
  return new ObjectStoreError("STORE_INVALID_RANGE", `get ${subject}: ${why}.`, { kind: "input", subject });
}

async function get(ctx: Ctx, key: string, options: GetOptions | undefined): Promise<Readable> {
  const name = objectName(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  const range = options?.range;
  if (range !== undefined) {
    const { start, end } = range;
    if (!Number.isSafeInteger(start) || start < 0)
      throw badRange(subject, `range start ${start} is not a non-negative integer`);
    if (end !== undefined && (!Number.isSafeInteger(end) || end < start)) {
      throw badRange(subject, `range end ${end} must be an integer at or after the start ${start}`);
    }
  }
  // An empty range cannot be asked of S3 (ranges are inclusive); check existence and bounds instead.
  const empty = range !== undefined && range.end === range.start;
  if (empty) {
    const info = await head(ctx, key, options);
    if (info === undefined)
      throw toStoreError({ name: "NoSuchKey", $metadata: { httpStatusCode: 404 } }, "get", subject);
    if (range.start > info.size)
      throw badRange(subject, `range start ${range.start} is past the end (${info.size} bytes)`);
    return Readable.from([]);
  }
  const header =
    range === undefined ? undefined : `bytes=${range.start}-${range.end === undefined ? "" : range.end - 1}`;
  try {
    const out = await retrying(ctx, "get", subject, options, (abortSignal) =>
      ctx.client
        .send(
          new GetObjectCommand({
            Bucket: ctx.bucket,
            Key: name,
            ...(header === undefined ? {} : { Range: header }),
          }),
          {
            abortSignal,
          },
        )
        .catch((error: unknown) => {
          if (httpStatusOf(error) === 416) return "unsatisfiable" as const;
          throw error;
        }),
    );
    if (out === "unsatisfiable") {
      const info = await head(ctx, key, options);
      if (info === undefined)
        throw toStoreError({ name: "NoSuchKey", $metadata: { httpStatusCode: 404 } }, "get", subject);
      if (range !== undefined && range.start === info.size) return Readable.from([]);
      throw badRange(subject, `range start ${range?.start} is past the end (${info.size} bytes)`);
    }
    if (!(out.Body instanceof Readable)) {
      throw new ObjectStoreError(
        "STORE_REQUEST_FAILED",
        `get ${subject}: the response has no readable body.`,
        {
          subject,
        },
      );
    }
    return out.Body;
  } catch (error) {
    throw toStoreError(error, "get", subject);
  }
}

async function* list(ctx: Ctx, prefix: string, options: ListOptions | undefined): AsyncGenerator<ObjectInfo> {
  validateListPrefix(prefix);
  const full = joinPrefix(ctx.prefix, prefix);
  const subject = `${ctx.uri}/${prefix}`;
  let token: string | undefined;
  do {
    const page = await retrying(ctx, "list", subject, options, (abortSignal) =>
      ctx.client.send(
        new ListObjectsV2Command({
          Bucket: ctx.bucket,
          Prefix: full,
          ...(options?.pageSize === undefined ? {} : { MaxKeys: options.pageSize }),
          ...(token === undefined ? {} : { ContinuationToken: token }),
        }),
        { abortSignal },
      ),
    );
    for (const item of page.Contents ?? []) {
      if (item.Key === undefined) continue;
      yield {
        key: ctx.prefix === "" ? item.Key : item.Key.slice(ctx.prefix.length + 1),
        size: item.Size ?? 0,
        ...(item.ETag === undefined ? {} : { etag: item.ETag }),
        ...(item.LastModified === undefined ? {} : { lastModified: item.LastModified }),
        metadata: {},
      };
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
}

async function remove(ctx: Ctx, key: string, call: CallOptions | undefined): Promise<void> {
  const name = objectName(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  await retrying(ctx, "delete", subject, call, async (abortSignal) => {
    try {
      await ctx.client.send(new DeleteObjectCommand({ Bucket: ctx.bucket, Key: name }), { abortSignal });
    } catch (error) {
      if (isNotFound(error) && errorNameOf(error) !== "NoSuchBucket") return;
      throw error;
    }
  });
}

/**
 * An ObjectStore on an S3 API: AWS, an S3-compatible server (Ceph RGW, MinIO, …), or GCS's XML
 * API at `storage.googleapis.com` (conditional creates then go through a GOOG4-signed XML PUT).
 */
export function createS3Store(options: S3StoreOptions): ObjectStore {
  const resolved = resolveS3Endpoint({
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    ...(options.dialect === undefined ? {} : { dialect: options.dialect }),
    env: options.env ?? process.env,
  });
  if (options.bucket === "" || options.bucket.includes("/")) {
    throw new ObjectStoreError(
      "STORE_BAD_URI",
      `S3 bucket "${options.bucket}" is not a bucket name. Write the URI as s3://bucket/prefix.`,
      { kind: "input" },
    );
  }
  const prefix = options.prefix.replace(/^\/+|\/+$/g, "");
  const uri = prefix === "" ? `s3://${options.bucket}` : `s3://${options.bucket}/${prefix}`;
  const ctx: Ctx = {
    client: options.client ?? makeS3Client(resolved, options.credentials),
    bucket: options.bucket,
    prefix,
    uri,
    dialect: resolved.dialect,
    endpoint: resolved.endpoint,
    region: resolved.region,
    retry: options.retry ?? {},
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    now: options.now ?? (() => new Date()),
  };
  const identity: DestinationIdentity = {
    scheme: "s3",
    endpoint: resolved.authority,
    bucket: options.bucket,
    prefix,
  };
  return {
    identity,
    uri,
    createIfAbsent: (key, body, opts) => createIfAbsent(ctx, key, body, opts),
    put: (key, body, opts) => put(ctx, key, body, opts),
    head: (key, opts) => head(ctx, key, opts),
    get: (key, opts) => get(ctx, key, opts),
    list: (listPrefix, opts) => list(ctx, listPrefix, opts),
    delete: (key, opts) => remove(ctx, key, opts),
  };
}
