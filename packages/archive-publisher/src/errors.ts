import { CkptSubjectError } from "@ckpt/errors";

export { type ErrorKind, isAbort, kindOf, messageOf } from "@ckpt/errors";
/** Every code this package raises; documented in docs/archive.md ("Publish"). */
export const ARCHIVE_PUBLISHER_ERROR_CODES = [
  "COMMIT_NOT_ITER_DIR",
  "COMMIT_FULL_CHECKPOINT",
  "COMMIT_ITERATION_MISMATCH",
  "COMMIT_BAD_COMPONENTS",
  "COMMIT_COMPONENT_MISSING",
  "COMMIT_COMPONENT_CONFLICT",
  "PUBLISH_ALREADY_COMMITTED",
  "PUBLISH_NOT_ITER_DIR",
  "PUBLISH_FULL_CHECKPOINT",
  "PUBLISH_NOT_COMMITTED",
  "PUBLISH_MANIFEST_INVALID",
  "PUBLISH_LEGACY_CONFLICT",
  "PUBLISH_PAYLOAD_MISMATCH",
  "PUBLISH_LOCAL_READ_FAILED",
  "PUBLISH_DECLARATION_CONFLICT",
  "PUBLISH_REMOTE_CONFLICT",
  "PUBLISH_CONDITIONAL_UNENFORCED",
  "PUBLISH_UPLOAD_VERIFY_FAILED",
  "PUBLISH_REMOTE_VERIFY_FAILED",
  "PUBLISH_RELEASED_REMOTE_INVALID",
  "PUBLISH_STORE_FAILED",
  "PUBLISH_LOCAL_WRITE_FAILED",
  "PUBLISH_NO_SPACE",
  "PUBLISH_DELETE_REFUSED",
  "PUBLISH_ABORTED",
  "PUBLISH_REPAIR_NOT_COMMITTED",
  "PUBLISH_REPAIR_MISMATCH",
  "FULL_UPLOAD_NOT_ITER_DIR",
  "FULL_UPLOAD_FAILED",
] as const;
export type ArchivePublisherErrorCode = (typeof ARCHIVE_PUBLISHER_ERROR_CODES)[number];

/**
 * The one error class of @ckpt/archive-publisher. `code` is stable, `kind` says whether a retry
 * can help, `subject` names the file or key concerned (never a secret).
 */
export class ArchivePublisherError extends CkptSubjectError<ArchivePublisherErrorCode> {
  override readonly name = "ArchivePublisherError";
}
