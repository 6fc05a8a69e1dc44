import { loadCredentials } from "./credentials.js";
import { ObjectStoreError } from "./errors.js";
import { createFileStore } from "./file/store.js";
import { createGcsStore } from "./gcs/store.js";
import { createMemoryStore } from "./memory/store.js";
import { createS3Store } from "./s3/store.js";
import type { ObjectStore, StoreCredentials, StoreRetryOptions } from "./types.js";
import { parseStoreUri } from "./uri.js";

export interface OpenStoreOptions {
  /** The seeds' credentials (or the path of their JSON file). s3:// only; gs:// takes none but endpoint_url. */
  readonly credentials?: StoreCredentials | string;
  /** Retry tuning of the remote backends. */
  readonly retry?: StoreRetryOptions;
  /** Per-attempt timeout in milliseconds. */
  readonly timeoutMs?: number;
  /** s3:// only: memory for multipart part buffers shared by the store's uploads (default 64 MiB). */
  readonly partBufferBytes?: number;
}

/**
 * Opens the store a URI names: `memory://name/prefix` (shared by name within the process),
 * `file:///abs/dir`, `s3://bucket/prefix` (endpoint, region and keys from the credentials only, so
 * the store's identity is exactly `destinationIdentity(uri, credentials)`), or `gs://bucket/prefix`
 * (Application Default Credentials). Throws `STORE_BAD_URI` / `STORE_BAD_CREDENTIALS` (kind input).
 */
export async function openStore(uri: string, options: OpenStoreOptions = {}): Promise<ObjectStore> {
  const parsed = parseStoreUri(uri);
  const credentials =
    typeof options.credentials === "string"
      ? await loadCredentials(options.credentials)
      : options.credentials;
  const tuning = {
    ...(options.retry === undefined ? {} : { retry: options.retry }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  };
  switch (parsed.scheme) {
    case "memory":
      return createMemoryStore({
        name: parsed.bucket,
        prefix: parsed.prefix,
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      });
    case "file":
      return createFileStore({
        root: parsed.bucket,
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      });
    case "s3":
      return createS3Store({
        bucket: parsed.bucket,
        prefix: parsed.prefix,
        ...(credentials === undefined ? {} : { credentials }),
        // The endpoint comes from the credentials file alone (receipts bind to what it names); the
        // region, which is not part of the identity, may still come from the environment.
        env: { AWS_REGION: process.env.AWS_REGION, AWS_DEFAULT_REGION: process.env.AWS_DEFAULT_REGION },
        ...(options.partBufferBytes === undefined ? {} : { partBufferBytes: options.partBufferBytes }),
        ...tuning,
      });
    case "gs": {
      if (credentials?.aws_access_key_id !== undefined) {
        throw new ObjectStoreError(
          "STORE_BAD_CREDENTIALS",
          `open ${uri}: HMAC keys address GCS through its S3-compatible XML API. ` +
            "Write the URI as s3://bucket/prefix with endpoint_url https://storage.googleapis.com, " +
            "or drop the keys to use gs:// with Application Default Credentials.",
          { kind: "input", subject: uri },
        );
      }
      return createGcsStore({
        bucket: parsed.bucket,
        prefix: parsed.prefix,
        ...(credentials?.endpoint_url === undefined ? {} : { apiEndpoint: credentials.endpoint_url }),
        ...tuning,
      });
    }
  }
}
