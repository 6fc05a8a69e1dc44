import { CkptSubjectError, type ErrorKind } from "@ckpt/errors";

export { type ErrorKind, kindOf, messageOf } from "@ckpt/errors";
/** Every code this package raises; documented in docs/trainer-checkpoint-manager.md ("Errors"). */
export const MANAGER_ERROR_CODES = [
  // configuration
  "MANAGER_CONFIG_INVALID",
  "MANAGER_CONFIG_CONFLICT",
  "MANAGER_BAD_ARGUMENT",
  // layout and attempts
  "MANAGER_RUN_TS_REQUIRED",
  "MANAGER_LAYOUT_FAILED",
  "MANAGER_WRITER_LOCKED",
  "MANAGER_WRITER_LOCK_LOST",
  "MANAGER_WINDOWS_INVALID",
  // saving
  "MANAGER_SAVE_REFUSED",
  "MANAGER_CHECKPOINT_EXISTS",
  "MANAGER_ARTIFACT_COMMITTED",
  "MANAGER_COMPONENT_MISSING",
  "MANAGER_COMPONENT_CONFLICT",
  "MANAGER_DCP_INCOMPLETE",
  "MANAGER_INVENTORY_INVALID",
  "MANAGER_SESSION_INVALID",
  "MANAGER_COMMIT_FAILED",
  "MANAGER_ASYNC_SAVE_FAILED",
  "MANAGER_ASYNC_DCP_BULK",
  "MANAGER_NO_SPACE",
  // resume
  "MANAGER_RESUME_NOT_FOUND",
  "MANAGER_RESUME_INCOMPLETE",
  "MANAGER_RESUME_UNREADABLE",
  "MANAGER_RESUME_IDENTITY_MISMATCH",
  "MANAGER_RESUME_ARTIFACT_SOURCE",
  "MANAGER_LEGACY_FRESH_REFUSED",
  "MANAGER_RESUME_POINTER_INVALID",
  "MANAGER_COLD_RESTART_OVER_ARTIFACT",
  "MANAGER_RESUME_BEHIND_ARTIFACT",
  "MANAGER_RESUME_ITERATION_UNKNOWN",
  "MANAGER_RESUME_PIN_MISMATCH",
  "MANAGER_RESUME_PIN_UNAVAILABLE",
  // validation transaction
  "MANAGER_VALIDATION_STATE",
  "MANAGER_PUBLICATION_FAILED",
  // multi-role
  "MANAGER_ROLES_MISMATCH",
  // direct object-store primary
  "MANAGER_STORE_FAILED",
  "MANAGER_PLAN_DRIFT",
  "MANAGER_REMOTE_INVALID",
  "MANAGER_LEASE_HELD",
  "MANAGER_LEASE_LOST",
  // lifecycle
  "MANAGER_FINALIZED",
  // read-only reports
  "MANAGER_ABORTED",
] as const;
export type ManagerErrorCode = (typeof MANAGER_ERROR_CODES)[number];

/**
 * MANAGER_NO_SPACE: the disk filled while `what` was written; the pointer still names the previous
 * checkpoint, and the same step saves again once space is freed.
 */
export function noSpace(what: string, subject: string, cause: unknown): ManagerError {
  return new ManagerError(
    "MANAGER_NO_SPACE",
    `${what}; nothing under the final name changed (latest_checkpoint.txt names the previous checkpoint); free space and run again.`,
    { kind: "failed", subject, cause },
  );
}

/**
 * The one error class of @ckpt/trainer-checkpoint-manager. `code` is stable, `kind` says whether
 * a retry can help, `subject` names the file, key or URI concerned and `knob` the configuration
 * knob (dotted, e.g. `checkpoint_store.backend`) when a setting is at fault. Never holds a secret.
 */
export class ManagerError extends CkptSubjectError<ManagerErrorCode> {
  override readonly name = "ManagerError";
  readonly knob: string | undefined;

  constructor(
    code: ManagerErrorCode,
    message: string,
    options: { kind: ErrorKind; subject?: string; knob?: string; cause?: unknown },
  ) {
    super(code, message, options);
    this.knob = options.knob;
  }
}

/** MANAGER_ABORTED: a read-only report (`collectEvidence`, `runStatus`) was cancelled by its caller's signal. */
export function throwIfAborted(signal: AbortSignal | undefined, subject: string): void {
  if (signal?.aborted !== true) return;
  throw new ManagerError("MANAGER_ABORTED", `${subject}: cancelled by the caller before it finished.`, {
    kind: "transient",
    subject,
    cause: signal.reason,
  });
}
