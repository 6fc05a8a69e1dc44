import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { File, FileMetadata, Storage, StorageOptions } from "@google-cloud/storage";
import { DEFAULT_GCS_ENDPOINT } from "../credentials.js";
import { ObjectStoreError } from "../errors.js";
import { bodySize, DEFAULT_PART_SIZE, digestMismatch, isMultipart, wholeBody } from "../internal/body.js";
import { remoteGet } from "../internal/get.js";
import { lazy } from "../internal/lazy.js";
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
  StoreRetryOptions,
} from "../types.js";
import { gcsStatusOf, gcsToStoreError } from "./errors.js";

/** A service-account key (the JSON file's fields the client needs); absent means ADC. */
export interface GcsServiceAccount {
  readonly client_email: string;
  readonly private_key: string;
  readonly project_id?: string;
}

export interface GcsStoreOptions {
  readonly bucket: string;
  readonly prefix: string;
  /** Service-account key; without it Application Default Credentials are used. */
  readonly credentials?: GcsServiceAccount;
  /** JSON API endpoint (default https://storage.googleapis.com). A custom one is used without auth. */
  readonly apiEndpoint?: string;
  readonly projectId?: string;
  readonly retry?: StoreRetryOptions;
  /** Per-attempt timeout in milliseconds (default 120 000). */
  readonly timeoutMs?: number;
  /** A ready client; its retries should be off (`retryOptions.autoRetry: false`). */
  readonly storage?: Storage;
}

/** Resumable chunks must be multiples of 256 KiB. */
const RESUMABLE_CHUNK_GRANULE = 256 * 1024;

/** The client library, loaded on first use (see `lazy`). */
const loadGcsSdk = lazy(() => import("@google-cloud/storage"));

interface Ctx extends RemoteContext {
  /** This store's client, created once the library is loaded. */
  readonly storage: () => Promise<Storage>;
  readonly bucket: string;
  readonly prefix: string;
}

async function file(ctx: Ctx, key: string): Promise<File> {
  validateKey(key);
  return (await ctx.storage()).bucket(ctx.bucket).file(joinPrefix(ctx.prefix, key));
}

function infoFrom(key: string, meta: FileMetadata): ObjectInfo {
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(meta.metadata ?? {})) {
    if (typeof value === "string") metadata[name] = value;
  }
  const updated = meta.updated === undefined ? undefined : new Date(meta.updated);
  return {
    key,
    size: Number(meta.size ?? 0),
    ...infoMetadata(metadata),
    ...(meta.etag === undefined ? {} : { etag: meta.etag }),
    ...(updated === undefined ? {} : { lastModified: updated }),
  };
}

async function head(ctx: Ctx, key: string, call?: CallOptions): Promise<ObjectInfo | undefined> {
  const f = await file(ctx, key);
  return retrying(ctx, "head", `${ctx.uri}/${key}`, call, async () => {
    try {
      const [meta] = await f.getMetadata();
      return infoFrom(key, meta);
    } catch (error) {
      if (gcsStatusOf(error) === 404) return undefined;
      throw error;
    }
  });
}

function uploadMetadata(options: PutOptions | undefined, metadata: Record<string, string>) {
  return {
    ...(options?.contentType === undefined ? {} : { contentType: options.contentType }),
    metadata,
  };
}

async function createIfAbsent(
  ctx: Ctx,
  key: string,
  body: Uint8Array,
  options: PutOptions | undefined,
): Promise<CreateResult> {
  const f = await file(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  const metadata = putMetadata(subject, options);
  return conditionalCreate(
    ctx,
    subject,
    body,
    options,
    async () => {
      try {
        await f.save(Buffer.from(body.buffer, body.byteOffset, body.byteLength), {
          resumable: false,
          preconditionOpts: { ifGenerationMatch: 0 },
          metadata: uploadMetadata(options, metadata),
        });
        return infoFrom(key, f.metadata);
      } catch (error) {
        if (gcsStatusOf(error) === 412) return "precondition-failed";
        throw error;
      }
    },
    () => head(ctx, key, options),
  );
}

/** A source that hashes and counts the bytes it hands on (for the digest check and onProgress). */
function counted(source: Readable, hash: Hash, onProgress: ((n: number) => void) | undefined): Readable {
  let sent = 0;
  return Readable.from(
    (async function* () {
      for await (const chunk of source) {
        hash.update(chunk as Buffer);
        sent += (chunk as Buffer).byteLength;
        onProgress?.(sent);
        yield chunk;
      }
    })(),
  );
}

async function put(
  ctx: Ctx,
  key: string,
  body: PutBody,
  options: PutOptions | undefined,
): Promise<ObjectInfo> {
  const f = await file(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  const metadata = putMetadata(subject, options);
  const size = await bodySize(body, subject);
  if (size !== undefined && !isMultipart(size, options)) {
    const held = await wholeBody(body, size, subject);
    if (metadata.sha256 !== undefined) {
      const actual = createHash("sha256").update(held).digest("hex");
      if (actual !== metadata.sha256) throw digestMismatch(subject, actual, metadata.sha256);
    }
    await retrying(ctx, "put", subject, options, () =>
      f.save(held, { resumable: false, metadata: uploadMetadata(options, metadata) }),
    );
    options?.onProgress?.(size);
    return infoFrom(key, f.metadata);
  }
  const requested = Math.max(options?.partSize ?? DEFAULT_PART_SIZE, RESUMABLE_CHUNK_GRANULE);
  const chunkSize = Math.ceil(requested / RESUMABLE_CHUNK_GRANULE) * RESUMABLE_CHUNK_GRANULE;
  const source = (): Readable =>
    body instanceof Uint8Array
      ? Readable.from([Buffer.from(body.buffer, body.byteOffset, body.byteLength)])
      : "path" in body
        ? createReadStream(body.path)
        : body.stream;
  // A stream can be consumed once; files and bytes are re-read on a retry.
  const retries = typeof body === "object" && "stream" in body ? 0 : undefined;
  let hash = createHash("sha256");
  await retrying(
    ctx,
    "put",
    subject,
    options,
    (signal) => {
      hash = createHash("sha256");
      return pipeline(
        counted(source(), hash, options?.onProgress),
        f.createWriteStream({ resumable: true, chunkSize, metadata: uploadMetadata(options, metadata) }),
        { signal },
      );
    },
    retries,
  );
  const actual = hash.digest("hex");
  if (metadata.sha256 !== undefined && actual !== metadata.sha256) {
    // The resumable upload has already committed: remove the object this call wrote.
    await f.delete({ ignoreNotFound: true });
    throw new ObjectStoreError(
      "STORE_INTEGRITY",
      `put ${subject}: the body's sha256 is ${actual} but the caller declared ${metadata.sha256}. ` +
        "The uploaded object was removed.",
      { kind: "input", subject },
    );
  }
  const info = infoFrom(key, f.metadata);
  if (size !== undefined && info.size !== size) {
    throw new ObjectStoreError(
      "STORE_INTEGRITY",
      `put ${subject}: GCS stored ${info.size} bytes but the body declared ${size}. Was the file changed while it was uploaded?`,
      { kind: "input", subject },
    );
  }
  return info;
}

/** Start a download and resolve once GCS has answered 2xx (errors surface here, not mid-stream). */
function openDownload(f: File, start: number | undefined, end: number | undefined): Promise<Readable> {
  const stream = f.createReadStream({
    ...(start === undefined ? {} : { start }),
    ...(end === undefined ? {} : { end }),
  });
  return new Promise((resolve, reject) => {
    const onError = (error: unknown) => reject(error);
    stream.once("error", onError);
    stream.once("response", (res: { statusCode?: number; status?: number }) => {
      const status = res.statusCode ?? res.status ?? 0;
      if (status >= 200 && status < 300) {
        stream.off("error", onError);
        resolve(stream);
      }
    });
    stream.read(0);
  });
}

async function get(ctx: Ctx, key: string, options: GetOptions | undefined): Promise<Readable> {
  const f = await file(ctx, key);
  const subject = `${ctx.uri}/${key}`;
  return remoteGet(
    subject,
    options?.range,
    () => head(ctx, key, options),
    (first, last) =>
      retrying(ctx, "get", subject, options, async () => {
        try {
          return await openDownload(f, first, last);
        } catch (error) {
          if (gcsStatusOf(error) === 416) return "unsatisfiable" as const;
          throw error;
        }
      }),
  );
}

async function* list(ctx: Ctx, prefix: string, options: ListOptions | undefined): AsyncGenerator<ObjectInfo> {
  validateListPrefix(prefix);
  const full = joinPrefix(ctx.prefix, prefix);
  const subject = `${ctx.uri}/${prefix}`;
  const bucket = (await ctx.storage()).bucket(ctx.bucket);
  let pageToken: string | undefined;
  do {
    const [files, next] = await retrying(ctx, "list", subject, options, () =>
      bucket.getFiles({
        prefix: full,
        autoPaginate: false,
        ...(options?.pageSize === undefined ? {} : { maxResults: options.pageSize }),
        ...(pageToken === undefined ? {} : { pageToken }),
      }),
    );
    for (const f of files) {
      yield infoFrom(keyBelow(ctx.prefix, f.name), f.metadata);
    }
    pageToken = (next as { pageToken?: string } | null | undefined)?.pageToken;
  } while (pageToken !== undefined);
}

async function remove(ctx: Ctx, key: string, call: CallOptions | undefined): Promise<void> {
  const f = await file(ctx, key);
  await retrying(ctx, "delete", `${ctx.uri}/${key}`, call, async () => {
    await f.delete({ ignoreNotFound: true });
  });
}

/**
 * An ObjectStore on Google Cloud Storage's JSON API via @google-cloud/storage, which is loaded on
 * the store's first request, not when the store is created.
 */
export function createGcsStore(options: GcsStoreOptions): ObjectStore {
  const { prefix, uri } = bucketLocation("gs", options.bucket, options.prefix);
  let authority = DEFAULT_GCS_ENDPOINT;
  if (options.apiEndpoint !== undefined) {
    try {
      authority = new URL(options.apiEndpoint).host.toLowerCase();
    } catch (error) {
      throw new ObjectStoreError(
        "STORE_BAD_URI",
        `GCS apiEndpoint "${options.apiEndpoint}" is not a URL. Write it as http(s)://host[:port].`,
        { kind: "input", cause: error },
      );
    }
  }
  const storageOptions: StorageOptions = {
    retryOptions: { autoRetry: false },
    ...(options.apiEndpoint === undefined ? {} : { apiEndpoint: options.apiEndpoint }),
    ...(options.projectId === undefined ? {} : { projectId: options.projectId }),
    ...(options.credentials === undefined
      ? {}
      : {
          credentials: {
            client_email: options.credentials.client_email,
            private_key: options.credentials.private_key,
          },
        }),
  };
  const ctx: Ctx = {
    storage: lazy(async () => options.storage ?? new (await loadGcsSdk()).Storage(storageOptions)),
    bucket: options.bucket,
    prefix,
    uri,
    retry: options.retry ?? {},
    timeoutMs: options.timeoutMs ?? DEFAULT_REMOTE_TIMEOUT_MS,
    toError: gcsToStoreError,
  };
  const identity: DestinationIdentity = { scheme: "gs", endpoint: authority, bucket: options.bucket, prefix };
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
