import { CkptSubjectError } from "@ckpt/errors";

export type { ErrorKind } from "@ckpt/errors";
/** Every code @ckpt/retention raises (documented in docs/retention.md). */
export type RetentionErrorCode =
  | "RETENTION_BAD_ARGUMENT"
  | "RETENTION_POLICY_RESULT"
  | "RETENTION_EVIDENCE_INCOMPLETE"
  | "RETENTION_NOT_A_CHECKPOINT_ROOT"
  | "RETENTION_SCAN_FAILED"
  | "RETENTION_TARGET_OUTSIDE_ROOT"
  | "RETENTION_ABORTED";

/**
 * The one error class of @ckpt/retention: a stable `code`, a `kind` saying whether other input or a
 * retry can help, and the path it is about in `subject`. Messages never carry a secret.
 */
export class RetentionError extends CkptSubjectError<RetentionErrorCode> {
  override readonly name = "RetentionError";
}
