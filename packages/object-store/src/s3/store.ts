import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import { ObjectStoreError } from "../errors.js";
import {
  bodySize,
  digestMismatch,
  holdUpTo,
  isMultipart,
  multipartThreshold,
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
import { type Ctx, objectHeaders, putInfo, type Upload } from "./context.js";
import { multipartPut } from "./multipart.js";
import { abortIncompleteUpload, listIncompleteUploads } from "./uploads.js";
import { loadS3Sdk, resolveS3Endpoint, type S3Dialect, s3ClientConfig } from "./client.js";
import { errorNameOf, httpStatusOf, isNotFound, isPreconditionFailed, toStoreError } from "./errors.js";
import { gcsConditionalPut } from "./gcs-xml.js";
import { isVirtualHostable, metadataOf, sendWire, type WireCredentials, wireAgent } from "./wire.js";

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

type SizedUpload = Upload & { readonly size: number };

/**
 * A file is streamed afresh on every attempt, hashed on the way, and its last chunk is held back
 * until the digest matches (see `verifiedFileStream`): one read pass, and a file rewritten after
 * it was hashed is never stored. Other bodies (at most the threshold) are held once and checked.
 */
async function singlePut(ctx: Ctx, upload: SizedUpload): Promise<ObjectInfo> {
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
  if (size === undefined && !(body instanceof Uint8Array) && "stream" in body) {
    // An unsized stream: held whole while it stays under the threshold, else sent part by part.
    const start = await holdUpTo(body.stream, multipartThreshold(options));
    if (start.ended) {
      const held = start.bytes;
      return singlePut(ctx, { key, name, subject, body: held, size: held.byteLength, metadata, options });
    }
    return multipartPut(ctx, { key, name, subject, body: { stream: start.stream }, size, metadata, options });
  }
  const upload: SizedUpload = { key, name, subject, body, size: size ?? 0, metadata, options };
  return isMultipart(upload.size, options) ? multipartPut(ctx, upload) : singlePut(ctx, upload);
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
    // The endpoint's origin (never credentials) names where a missing bucket or refused connection is.
    toError: (error, action, subject) => toStoreError(error, action, subject, endpoint.origin),
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
    listIncompleteUploads: (opts) => listIncompleteUploads(ctx, opts),
    abortIncompleteUpload: (upload, opts) => abortIncompleteUpload(ctx, upload, opts),
  };
}
