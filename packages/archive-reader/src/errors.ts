import { CkptSubjectError } from "@ckpt/errors";

export type { ErrorKind } from "@ckpt/errors";
/** Every code @ckpt/archive-reader raises (documented in docs/archive.md). */
export type ArchiveReaderErrorCode =
  | "READER_RECEIPT_MISSING"
  | "READER_RECEIPT_INVALID"
  | "READER_LEGACY_RECEIPT"
  | "READER_RECEIPT_DESTINATION_MISMATCH"
  | "READER_REMOTE_INCOMPLETE"
  | "READER_REMOTE_RECORD_TOO_LARGE"
  | "READER_REMOTE_RECORD_INVALID"
  | "READER_DECLARATION_MISMATCH"
  | "READER_LEGACY_DCP_UNPROVABLE"
  | "READER_UNVERIFIABLE"
  | "READER_STAGE_FOREIGN"
  | "READER_STAGE_NOT_DIRECTORY"
  | "READER_STAGE_RECORD_INVALID"
  | "READER_DOWNLOAD_MISMATCH"
  | "READER_DCP_INCOMPLETE"
  | "READER_NO_SPACE"
  | "READER_ABORTED";

/**
 * The one error class of @ckpt/archive-reader: a stable `code`, a `kind` saying whether a retry or
 * other input can help, and the file or object key it is about in `subject` (never a secret).
 */
export class ArchiveReaderError extends CkptSubjectError<ArchiveReaderErrorCode> {
  override readonly name = "ArchiveReaderError";
}
