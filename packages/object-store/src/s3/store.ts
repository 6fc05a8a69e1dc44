import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import { ObjectStoreError } from "../errors.js";
import {
  abortError,
  bodyParts,
  bodySize,
  DEFAULT_CONCURRENCY,
  digestMismatch,
  effectivePartSize,
  isMultipart,
  verifiedFileStream,
  wholeBody,
} from "../internal/body.js";
import { remoteGet } from "../internal/get.js";
import { lazy } from "../internal/lazy.js";
import { DEFAULT_PART_BUFFER_BYTES, PartBuffers } from "../internal/parts.js";
import { joinPrefix, keyBelow, validateKey, validateListPrefix } from "../internal/keys.js";
import { infoMetadata, putMetadata } from "../internal/put-options.js";
import {
  bucketLocation,
  conditionalCreate,
  DEFAULT_REMOTE_TIMEOUT_MS,
  type RemoteContext,
  retrying,
} from "../internal/remote.js";
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
  StoreRetryOptions,
} from "../types.js";
import { loadS3Sdk, resolveS3Endpoint, type S3Dialect, type S3Sdk, s3ClientConfig } from "./client.js";
import { errorNameOf, httpStatusOf, isNotFound, isPreconditionFailed, toStoreError } from "./errors.js";
import { gcsConditionalPut } from "./gcs-xml.js";
import {
  isVirtualHostable,
  metadataOf,
  sendWire,
  type WireCredentials,
  type WireTarget,
  wireAgent,
} from "./wire.js";

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
  /**
   * Memory for multipart part buffers, shared by all concurrent uploads of this store (default
   * 64 MiB): what bounds an upload's memory, whatever the number of files in flight.
   */
  readonly partBufferBytes?: number;
  /** Overrides the dialect detected from the endpoint host (`storage.googleapis.com` means gcs). */
  readonly dialect?: S3Dialect;
  /** Environment consulted for the endpoint and region (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Clock for request signing (default `() => new Date()`). */
  readonly now?: () => Date;
}

/** The full object name of `key` below the store prefix, after validating the key. */
function objectName(ctx: Ctx, key: string): string {
  validateKey(key);
  return joinPrefix(ctx.prefix, key);
}

/** The SDK module and this store's client, created on first use. */
interface Sdk {
  readonly sdk: S3Sdk;
  readonly client: S3Client;
}

interface Ctx extends RemoteContext {
  readonly load: () => Promise<Sdk>;
  /** Plain signed HTTP for the requests of an upload (see wire.ts). */
  readonly wire: WireTarget;
  readonly parts: PartBuffers;
  readonly bucket: string;
  readonly prefix: string;
  readonly dialect: S3Dialect;
  readonly endpoint: string | undefined;
  readonly region: string;
  readonly now: () => Date;
}

/** The same, as the headers of a plain request. */
function wireHeaders(
  metadata: Record<string, string>,
  options: PutOptions | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(metadata)) headers[`x-amz-meta-${name}`] = value;
  if (options?.contentType !== undefined) headers["content-type"] = options.contentType;
  return headers;
}

/** The user metadata and content type every write request carries. */
function objectHeaders(metadata: Record<string, string>, options: PutOptions | undefined) {
  return {
    Metadata: metadata,
    ...(options?.contentType === undefined ? {} : { ContentType: options.contentType }),
  };
}

function putInfo(key: string, size: number, metadata: Record<string, string>, etag?: string): ObjectInfo {
  return { key, size, ...infoMetadata(metadata), ...(etag === undefined ? {} : { etag }) };
}

async function head(ctx: Ctx, key: string, call?: CallOptions): Promise<ObjectInfo | undefined> {
  const name = objectName(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  return retrying(ctx, "head", subject, call, async (signal) => {
    try {
      const { headers } = await sendWire(ctx.wire, { method: "HEAD", name, signal });
      const lastModified = headers["last-modified"];
      return {
        key,
        size: Number(headers["content-length"] ?? 0),
        ...infoMetadata(metadataOf(headers)),
        ...(headers.etag === undefined ? {} : { etag: headers.etag }),
        ...(lastModified === undefined ? {} : { lastModified: new Date(lastModified) }),
      };
    } catch (error) {
      // A HEAD has no error document: a missing bucket is a 404 too, as through the SDK.
      if (isNotFound(error)) return undefined;
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
  const created = (etag: string | undefined) => putInfo(key, body.byteLength, metadata, etag);
  const { sdk, client } = await ctx.load();
  return conditionalCreate(
    ctx,
    subject,
    body,
    options,
    async (abortSignal) => {
      try {
        if (ctx.dialect === "gcs") {
          const credentials = await client.config.credentials();
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
          return created(result.etag);
        }
        const out = await client.send(
          new sdk.PutObjectCommand({
            Bucket: ctx.bucket,
            Key: name,
            Body: body,
            ContentLength: body.byteLength,
            IfNoneMatch: "*",
            ...objectHeaders(metadata, options),
          }),
          { abortSignal },
        );
        return created(out.ETag);
      } catch (error) {
        if (isPreconditionFailed(error)) return "precondition-failed";
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
    },
    () => head(ctx, key, options),
  );
}

/** One put, sized and named: what the single-request and the multipart paths both need. */
interface Upload {
  readonly key: string;
  /** The full object name below the bucket. */
  readonly name: string;
  readonly subject: string;
  readonly body: PutBody;
  readonly size: number;
  readonly metadata: Record<string, string>;
  readonly options: PutOptions | undefined;
}

/**
 * A file is streamed afresh on every attempt, hashed on the way, and its last chunk is held back
 * until the digest matches (see `verifiedFileStream`): one read pass, and a file rewritten after
 * it was hashed is never stored. Other bodies (at most the threshold) are held once and checked.
 */
async function singlePut(ctx: Ctx, upload: Upload): Promise<ObjectInfo> {
  const { key, name, subject, body, size, metadata, options } = upload;
  const headers = wireHeaders(metadata, options);
  let etag: string | string[] | undefined;
  if (typeof body === "object" && "path" in body) {
    const path = body.path;
    etag = await retrying(ctx, "put", subject, options, async (signal) => {
      const source = verifiedFileStream(path, size, metadata.sha256, subject);
      try {
        const out = await sendWire(ctx.wire, {
          method: "PUT",
          name,
          headers,
          body: { stream: source.stream, length: size },
          signal,
        });
        return out.headers.etag;
      } catch (error) {
        throw source.failure() ?? error;
      } finally {
        source.stream.destroy();
      }
    });
  } else {
    const held = await wholeBody(body, size, subject);
    if (metadata.sha256 !== undefined) {
      const digest = createHash("sha256").update(held).digest("hex");
      if (digest !== metadata.sha256) throw digestMismatch(subject, digest, metadata.sha256);
    }
    etag = await retrying(ctx, "put", subject, options, async (signal) => {
      const out = await sendWire(ctx.wire, { method: "PUT", name, headers, body: held, signal });
      return out.headers.etag;
    });
  }
  options?.onProgress?.(size);
  return putInfo(key, size, metadata, typeof etag === "string" ? etag : undefined);
}

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
async function multipartPut(ctx: Ctx, upload: Upload): Promise<ObjectInfo> {
  const { key, name, subject, body, size, metadata, options } = upload;
  const partSize = effectivePartSize(size, options?.partSize);
  const concurrency = Math.max(1, options?.concurrency ?? DEFAULT_CONCURRENCY);
  const { sdk, client } = await ctx.load();
  const created = await retrying(ctx, "start multipart upload of", subject, options, (abortSignal) =>
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
    return putInfo(key, size, metadata, done.ETag);
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
  const upload: Upload = { key, name, subject, body, size, metadata, options };
  return isMultipart(size, options) ? multipartPut(ctx, upload) : singlePut(ctx, upload);
}

async function get(ctx: Ctx, key: string, options: GetOptions | undefined): Promise<Readable> {
  const name = objectName(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  const { sdk, client } = await ctx.load();
  return remoteGet(
    subject,
    options?.range,
    () => head(ctx, key, options),
    (first, last) =>
      retrying(ctx, "get", subject, options, async (abortSignal) => {
        const out = await client
          .send(
            new sdk.GetObjectCommand({
              Bucket: ctx.bucket,
              Key: name,
              ...(first === undefined ? {} : { Range: `bytes=${first}-${last ?? ""}` }),
            }),
            { abortSignal },
          )
          .catch((error: unknown) => {
            if (httpStatusOf(error) === 416) return "unsatisfiable" as const;
            throw error;
          });
        if (out === "unsatisfiable") return out;
        if (!(out.Body instanceof Readable)) {
          throw new ObjectStoreError(
            "STORE_REQUEST_FAILED",
            `get ${subject}: the response has no readable body.`,
            { kind: "failed", subject },
          );
        }
        return out.Body;
      }),
  );
}

async function* list(ctx: Ctx, prefix: string, options: ListOptions | undefined): AsyncGenerator<ObjectInfo> {
  validateListPrefix(prefix);
  const full = joinPrefix(ctx.prefix, prefix);
  const subject = `${ctx.uri}/${prefix}`;
  const { sdk, client } = await ctx.load();
  let token: string | undefined;
  do {
    const page = await retrying(ctx, "list", subject, options, (abortSignal) =>
      client.send(
        new sdk.ListObjectsV2Command({
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
        key: keyBelow(ctx.prefix, item.Key),
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
  const { sdk, client } = await ctx.load();
  await retrying(ctx, "delete", subject, call, async (abortSignal) => {
    try {
      await client.send(new sdk.DeleteObjectCommand({ Bucket: ctx.bucket, Key: name }), { abortSignal });
    } catch (error) {
      if (isNotFound(error) && errorNameOf(error) !== "NoSuchBucket") return;
      throw error;
    }
  });
}

/**
 * An ObjectStore on an S3 API: AWS, an S3-compatible server (Ceph RGW, MinIO, …), or GCS's XML
 * API at `storage.googleapis.com` (conditional creates then go through a GOOG4-signed XML PUT).
 * The AWS SDK is loaded on the store's first request, not when the store is created.
 */
export function createS3Store(options: S3StoreOptions): ObjectStore {
  const resolved = resolveS3Endpoint({
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    ...(options.dialect === undefined ? {} : { dialect: options.dialect }),
    env: options.env ?? process.env,
  });
  const { prefix, uri } = bucketLocation("s3", options.bucket, options.prefix);
  // Built (and the credentials checked) now; the client itself only once the SDK is loaded.
  const config = s3ClientConfig(resolved, options.credentials);
  const load = lazy(async () => {
    const sdk = await loadS3Sdk();
    return { sdk, client: options.client ?? new sdk.S3Client(config) };
  });
  const endpoint = new URL(config.endpoint as string);
  const keys = config.credentials as WireCredentials | undefined;
  const ctx: Ctx = {
    load,
    wire: {
      endpoint,
      bucket: options.bucket,
      virtualHost: resolved.dialect === "aws" && isVirtualHostable(options.bucket),
      region: resolved.region,
      // Explicit keys sign directly; otherwise the SDK's default chain resolves (and refreshes) them.
      credentials:
        keys === undefined ? async () => (await load()).client.config.credentials() : async () => keys,
      agent: wireAgent(endpoint),
      now: options.now ?? (() => new Date()),
    },
    parts: new PartBuffers(options.partBufferBytes ?? DEFAULT_PART_BUFFER_BYTES),
    bucket: options.bucket,
    prefix,
    uri,
    dialect: resolved.dialect,
    endpoint: resolved.endpoint,
    region: resolved.region,
    retry: options.retry ?? {},
    timeoutMs: options.timeoutMs ?? DEFAULT_REMOTE_TIMEOUT_MS,
    toError: toStoreError,
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
