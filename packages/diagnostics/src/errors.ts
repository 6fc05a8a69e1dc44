import { CkptSubjectError } from "@ckpt/errors";

/** Every code @ckpt/diagnostics raises (documented in docs/troubleshooting.md). */
export type DiagnosticsErrorCode = "FINGERPRINT_NOT_A_DIRECTORY" | "STORAGE_PROBE_NOT_A_DIRECTORY";

/**
 * The one error class of @ckpt/diagnostics: a stable `code`, a `kind`, and the directory it is
 * about in `subject`. Errors of the files inside it come from @ckpt/manifest (hashing, path safety).
 */
export class DiagnosticsError extends CkptSubjectError<DiagnosticsErrorCode> {
  override readonly name = "DiagnosticsError";
}
