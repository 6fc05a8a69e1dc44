import { isTransientStoreError, ObjectStoreError } from "../errors.js";
import type { CallOptions, CreateResult, ObjectInfo, PutOptions, StoreRetryOptions } from "../types.js";
import { formatStoreUri } from "../uri.js";
import { withRetry } from "./retry.js";

/** Default per-attempt timeout of a remote request; a 16 MiB part at 1 MiB/s still fits. */
export const DEFAULT_REMOTE_TIMEOUT_MS = 120_000;

/** What every remote backend's context holds for running requests. */
export interface RemoteContext {
  /** The store's URI (`s3://bucket/prefix`, `gs://…`); subjects are `${uri}/${key}`. */
  readonly uri: string;
  readonly retry: StoreRetryOptions;
  readonly timeoutMs: number;
  /** Maps a client failure of `action` on `subject` to an ObjectStoreError (transient or not). */
  readonly toError: (error: unknown, action: string, subject: string) => ObjectStoreError;
}

/**
 * Run one request with retries of transient failures; `request` gets the attempt's AbortSignal
 * (caller's abort and per-attempt timeout) to hand to the client. `retries` overrides the store's
 * count for a request that cannot be replayed.
 */
export function retrying<T>(
  ctx: RemoteContext,
  action: string,
  subject: string,
  call: CallOptions | undefined,
  request: (signal: AbortSignal) => Promise<T>,
  retries?: number,
): Promise<T> {
  return withRetry(
    async (_attempt, signal) => {
      try {
        return await request(signal);
      } catch (error) {
        throw ctx.toError(error, action, subject);
      }
    },
    {
      ...ctx.retry,
      ...(retries === undefined ? {} : { retries }),
      isTransient: isTransientStoreError,
      subject,
      timeoutMs: call?.timeoutMs ?? ctx.timeoutMs,
      ...(call?.signal === undefined ? {} : { signal: call.signal }),
    },
  );
}

/**
 * The create-once protocol of a remote store: `attempt` is one conditional write (retried while
 * transient) that resolves to the new object's info, or to "precondition-failed" on a 412. A 412
 * alone does not prove the object exists, so it is confirmed by `head`: `exists` with what the HEAD
 * finds, else `STORE_PRECONDITION_UNCONFIRMED` (transient).
 */
export async function conditionalCreate(
  ctx: RemoteContext,
  subject: string,
  body: Uint8Array,
  options: PutOptions | undefined,
  attempt: (signal: AbortSignal) => Promise<ObjectInfo | "precondition-failed">,
  head: () => Promise<ObjectInfo | undefined>,
): Promise<CreateResult> {
  const created = await retrying(ctx, "create", subject, options, attempt);
  if (created !== "precondition-failed") {
    options?.onProgress?.(body.byteLength);
    return { status: "created", info: created };
  }
  const existing = await head();
  if (existing !== undefined) return { status: "exists", info: existing };
  throw new ObjectStoreError(
    "STORE_PRECONDITION_UNCONFIRMED",
    `create ${subject}: the endpoint answered 412 Precondition Failed but a HEAD finds no object. ` +
      "A 412 alone does not prove the object exists; retry, and qualify the endpoint with `ckpt doctor object-store`.",
    { kind: "transient", subject },
  );
}

/**
 * The normalised prefix and URI of a bucket store; `STORE_BAD_URI` (kind input) for a bucket that
 * is empty or holds a '/'.
 */
export function bucketLocation(
  scheme: "s3" | "gs",
  bucket: string,
  prefix: string,
): { prefix: string; uri: string } {
  if (bucket === "" || bucket.includes("/")) {
    throw new ObjectStoreError(
      "STORE_BAD_URI",
      `${scheme === "s3" ? "S3" : "GCS"} bucket "${bucket}" is not a bucket name. Write the URI as ${scheme}://bucket/prefix.`,
      { kind: "input" },
    );
  }
  const trimmed = prefix.replace(/^\/+|\/+$/g, "");
  return { prefix: trimmed, uri: formatStoreUri({ scheme, bucket, prefix: trimmed }) };
}
