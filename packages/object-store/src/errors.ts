import { redact } from "./redact.js";

/** What the caller can do about an error; the CLI maps `input` to exit 2 and the rest to exit 1. */
export type ErrorKind = "input" | "refused" | "failed" | "transient";

export type ObjectStoreErrorCode =
  | "STORE_BAD_URI"
  | "STORE_BAD_CREDENTIALS"
  | "STORE_INVALID_KEY"
  | "STORE_INVALID_RANGE"
  | "STORE_INVALID_METADATA"
  | "STORE_NOT_FOUND"
  | "STORE_ACCESS_DENIED"
  | "STORE_NO_CREDENTIALS"
  | "STORE_CONDITIONAL_UNSUPPORTED"
  | "STORE_PRECONDITION_UNCONFIRMED"
  | "STORE_INTEGRITY"
  | "STORE_TIMEOUT"
  | "STORE_ABORTED"
  | "STORE_TRANSIENT"
  | "STORE_REQUEST_FAILED";

export class ObjectStoreError extends Error {
  override readonly name = "ObjectStoreError";
  readonly code: ObjectStoreErrorCode;
  readonly kind: ErrorKind;
  /** The object key or URI the error is about (never a secret). */
  readonly subject: string | undefined;

  /** The message and subject are passed through `redact()`: no secret survives into an error. */
  constructor(
    code: ObjectStoreErrorCode,
    message: string,
    options: { kind?: ErrorKind; subject?: string; cause?: unknown } = {},
  ) {
    super(redact(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.kind = options.kind ?? "failed";
    this.subject = options.subject === undefined ? undefined : redact(options.subject);
  }
}

/** True for an ObjectStoreError whose kind says a retry may succeed. */
export function isTransientStoreError(error: unknown): boolean {
  return error instanceof ObjectStoreError && error.kind === "transient";
}
