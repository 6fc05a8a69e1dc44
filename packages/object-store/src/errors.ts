import { CkptSubjectError, type ErrorKind } from "@ckpt/errors";
import { redact } from "./redact.js";

export type { ErrorKind } from "@ckpt/errors";

export type ObjectStoreErrorCode =
  | "STORE_BAD_URI"
  | "STORE_BAD_CREDENTIALS"
  | "STORE_INVALID_KEY"
  | "STORE_INVALID_RANGE"
  | "STORE_INVALID_METADATA"
  | "STORE_UNSAFE_PATH"
  | "STORE_NOT_FOUND"
  | "STORE_NO_SUCH_BUCKET"
  | "STORE_NO_SPACE"
  | "STORE_ACCESS_DENIED"
  | "STORE_NO_CREDENTIALS"
  | "STORE_CONDITIONAL_UNSUPPORTED"
  | "STORE_PRECONDITION_UNCONFIRMED"
  | "STORE_INTEGRITY"
  | "STORE_TIMEOUT"
  | "STORE_ABORTED"
  | "STORE_TRANSIENT"
  | "STORE_REQUEST_FAILED";

export class ObjectStoreError extends CkptSubjectError<ObjectStoreErrorCode> {
  override readonly name = "ObjectStoreError";

  /** The message and subject are passed through `redact()`: no secret survives into an error. */
  constructor(
    code: ObjectStoreErrorCode,
    message: string,
    options: { kind: ErrorKind; subject?: string; cause?: unknown },
  ) {
    super(code, redact(message), {
      ...options,
      subject: options.subject === undefined ? undefined : redact(options.subject),
    });
  }
}

/** True for an ObjectStoreError whose kind says a retry may succeed. */
export function isTransientStoreError(error: unknown): boolean {
  return error instanceof ObjectStoreError && error.kind === "transient";
}
