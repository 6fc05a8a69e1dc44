import { ObjectStoreError } from "../errors.js";

/** The fields of an AWS SDK v3 (smithy) service error or a Node network error that the mapping reads. */
interface ErrorShape {
  readonly name?: unknown;
  readonly code?: unknown;
  readonly Code?: unknown;
  readonly message?: unknown;
  readonly $metadata?: { readonly httpStatusCode?: unknown };
  readonly $retryable?: unknown;
  readonly cause?: unknown;
}

const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_SOCKET",
]);
const THROTTLING_NAMES = new Set([
  "SlowDown",
  "Throttling",
  "ThrottlingException",
  "RequestLimitExceeded",
  "TooManyRequestsException",
  "RequestTimeout",
  "RequestTimeTooSkewed",
  "InternalError",
  "ServiceUnavailable",
]);
const DENIED_NAMES = new Set([
  "AccessDenied",
  "InvalidAccessKeyId",
  "SignatureDoesNotMatch",
  "InvalidToken",
  "ExpiredToken",
]);

function shapeOf(error: unknown): ErrorShape {
  return typeof error === "object" && error !== null ? (error as ErrorShape) : {};
}

/** The HTTP status of an SDK error, when the server answered. */
export function httpStatusOf(error: unknown): number | undefined {
  const status = shapeOf(error).$metadata?.httpStatusCode;
  return typeof status === "number" ? status : undefined;
}

/** The S3 error name (`NoSuchKey`, `PreconditionFailed`, …) or the Node error code. */
export function errorNameOf(error: unknown): string {
  const shape = shapeOf(error);
  for (const candidate of [shape.Code, shape.code, shape.name]) {
    if (typeof candidate === "string" && candidate !== "Error" && candidate !== "") return candidate;
  }
  return "Error";
}

function networkCodeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== undefined; depth++) {
    const code = shapeOf(current).code;
    if (typeof code === "string" && NETWORK_CODES.has(code)) return code;
    current = shapeOf(current).cause;
  }
  return undefined;
}

export function isNotFound(error: unknown): boolean {
  const name = errorNameOf(error);
  return httpStatusOf(error) === 404 || name === "NotFound" || name === "NoSuchKey";
}

export function isPreconditionFailed(error: unknown): boolean {
  return httpStatusOf(error) === 412 || errorNameOf(error) === "PreconditionFailed";
}

/**
 * Translate an SDK or network failure of `action` on `subject` (a URI, never a secret) into an
 * ObjectStoreError. 5xx, throttling, connection resets and timeouts are `transient`: the retry
 * helper retries those and nothing else.
 */
export function toStoreError(
  error: unknown,
  action: string,
  subject: string,
  endpoint?: string,
): ObjectStoreError {
  if (error instanceof ObjectStoreError) return error;
  const status = httpStatusOf(error);
  const name = errorNameOf(error);
  const what = status === undefined ? name : `HTTP ${status} ${name}`;
  const where = `${action} ${subject}`;
  const options = { kind: "failed" as const, subject, cause: error };
  if (name === "AbortError") {
    return new ObjectStoreError("STORE_ABORTED", `${where}: aborted by the caller.`, options);
  }
  if (name === "TimeoutError" || name === "RequestTimeout" || networkCodeOf(error) === "ETIMEDOUT") {
    return new ObjectStoreError(
      "STORE_TIMEOUT",
      `${where}: timed out (${what}). Retry, or raise the store's timeoutMs.`,
      { ...options, kind: "transient" },
    );
  }
  const at = endpoint === undefined ? "" : ` at ${endpoint}`;
  if (status === 404 && name === "NoSuchBucket") {
    // Its own code: a missing bucket is a wrong URI or endpoint, never an unfinished archive.
    return new ObjectStoreError(
      "STORE_NO_SUCH_BUCKET",
      `${where}: the bucket does not exist${at} (${what}). Fix the bucket name in the URI, or the endpoint (credentials endpoint_url, AWS_ENDPOINT_URL), or create the bucket.`,
      options,
    );
  }
  if (isNotFound(error)) {
    return new ObjectStoreError("STORE_NOT_FOUND", `${where}: no such object (${what}).`, options);
  }
  if (name === "CredentialsProviderError") {
    // The SDK's default chain came up empty: nothing was sent, so no permission is at fault.
    return new ObjectStoreError(
      "STORE_NO_CREDENTIALS",
      `${where}: no credentials found. Pass a credentials file (--credentials, or $CKPT_CREDENTIALS), or set the default chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance role.`,
      options,
    );
  }
  if (status === 403 || status === 401 || DENIED_NAMES.has(name)) {
    return new ObjectStoreError(
      "STORE_ACCESS_DENIED",
      `${where}: access denied (${what}). Check the credentials file or the default credential chain, and the bucket's permissions.`,
      options,
    );
  }
  const network = networkCodeOf(error);
  if (
    network !== undefined ||
    (status !== undefined && status >= 500) ||
    status === 429 ||
    THROTTLING_NAMES.has(name) ||
    shapeOf(error).$retryable !== undefined
  ) {
    const unreachable = network !== undefined && endpoint !== undefined;
    const remedy = unreachable
      ? `Check that ${endpoint} is the store's endpoint (credentials endpoint_url, AWS_ENDPOINT_URL) and reachable, then retry.`
      : "Retry later.";
    return new ObjectStoreError(
      "STORE_TRANSIENT",
      `${where}: temporary failure (${network ?? what}${unreachable ? ` reaching ${endpoint}` : ""}). ${remedy}`,
      { ...options, kind: "transient" },
    );
  }
  return new ObjectStoreError("STORE_REQUEST_FAILED", `${where}: request failed (${what}).`, options);
}
