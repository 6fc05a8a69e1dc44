import type { Readable } from "node:stream";

/**
 * Where objects go, without any secret: the endpoint authority (host[:port], or "local" for
 * file://, or the memory store's name), the bucket (for file:// the absolute root directory) and
 * the key prefix below it. Receipts bind to exactly this triple.
 */
export interface DestinationIdentity {
  readonly scheme: "s3" | "gs" | "file" | "memory";
  readonly endpoint: string;
  readonly bucket: string;
  readonly prefix: string;
}

/** What a HEAD (or a listing) knows about one object. `sha256` comes from user metadata. */
export interface ObjectInfo {
  readonly key: string;
  readonly size: number;
  readonly sha256?: string;
  readonly etag?: string;
  readonly lastModified?: Date;
  readonly metadata: Readonly<Record<string, string>>;
}

/** Retry tuning of the remote backends (full-jitter exponential backoff of transient failures). */
export interface StoreRetryOptions {
  readonly retries?: number;
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Injectable wait, for tests. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface CallOptions {
  readonly signal?: AbortSignal;
  /** Per-call timeout in milliseconds (each attempt); the store default applies when absent. */
  readonly timeoutMs?: number;
}

export interface PutOptions extends CallOptions {
  /** Lower-case hex SHA-256 of the body, stored as user metadata `sha256`. */
  readonly sha256?: string;
  readonly contentType?: string;
  /** Extra user metadata (never secrets). */
  readonly metadata?: Readonly<Record<string, string>>;
  /** Bytes above which a put goes multipart/resumable (default 64 MiB). */
  readonly multipartThreshold?: number;
  readonly partSize?: number;
  readonly concurrency?: number;
  /** Called with the running byte count while uploading. */
  readonly onProgress?: (bytesSent: number) => void;
}

/**
 * A payload: bytes in memory, a local file (read with positioned reads), or a stream. A stream
 * without `size` is written as it arrives (a writer that learns its size only at the end): on S3
 * it is held and sent in one request while it stays under the multipart threshold, else uploaded
 * part by part (at most 10,000 parts of `partSize`); GCS takes it as a resumable upload. It is
 * read once, so a failed upload is not retried whole (parts are).
 */
export type PutBody =
  | Uint8Array
  | { readonly path: string }
  | { readonly stream: Readable; readonly size?: number };

export interface GetOptions extends CallOptions {
  /**
   * Inclusive start, exclusive end (end defaults to the object's end; an end past the object's end
   * is clamped to it). `start === end`, or `start === size` without an end, is an empty body (the
   * object must still exist). Negative or non-integer bounds, `end < start` and `start > size` are
   * `STORE_INVALID_RANGE`. A missing object is `STORE_NOT_FOUND`.
   */
  readonly range?: { readonly start: number; readonly end?: number };
}

export interface ListOptions extends CallOptions {
  /** Maximum keys per page requested from the backend (pagination is followed transparently). */
  readonly pageSize?: number;
}

/** Outcome of a conditional create. `exists` is only returned after the existing object was seen. */
export type CreateResult =
  | { readonly status: "created"; readonly info: ObjectInfo }
  | { readonly status: "exists"; readonly info: ObjectInfo };

/** An upload started and neither completed nor aborted (an S3 multipart upload), below the store prefix. */
export interface IncompleteUpload {
  readonly key: string;
  readonly uploadId: string;
  /** Bytes its uploaded parts hold. */
  readonly bytes: number;
  readonly initiated?: Date;
}

/**
 * The one storage interface every ckpt layer uses. Keys are relative POSIX paths below the store's
 * prefix. Implementations: memory (tests, fault injection), file://, s3://, gs://.
 */
export interface ObjectStore {
  readonly identity: DestinationIdentity;
  /** The store's URI with no secret in it, e.g. `s3://bucket/prefix`. */
  readonly uri: string;
  /** Create `key` only if absent (S3 `If-None-Match: *`, GCS `ifGenerationMatch: 0`, atomic link on file://). */
  createIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<CreateResult>;
  put(key: string, body: PutBody, options?: PutOptions): Promise<ObjectInfo>;
  /** `undefined` when the object does not exist. */
  head(key: string, options?: CallOptions): Promise<ObjectInfo | undefined>;
  get(key: string, options?: GetOptions): Promise<Readable>;
  list(prefix: string, options?: ListOptions): AsyncIterable<ObjectInfo>;
  /** Deleting a missing key is not an error. */
  delete(key: string, options?: CallOptions): Promise<void>;
  /**
   * Incomplete uploads below the store prefix; absent where the backend has none to list (file://
   * writes through local temporaries, and GCS resumable sessions cannot be listed: they expire).
   */
  listIncompleteUploads?(options?: CallOptions): AsyncIterable<IncompleteUpload>;
  abortIncompleteUpload?(upload: IncompleteUpload, options?: CallOptions): Promise<void>;
}

/** The seeds' credentials file: `{aws_access_key_id, aws_secret_access_key, endpoint_url, region_name}`. */
export interface StoreCredentials {
  readonly aws_access_key_id?: string;
  readonly aws_secret_access_key?: string;
  readonly endpoint_url?: string;
  readonly region_name?: string;
}
