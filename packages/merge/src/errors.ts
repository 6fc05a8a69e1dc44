import { CkptError, type ErrorKind } from "@ckpt/errors";

export type { ErrorKind } from "@ckpt/errors";
/** Every code @ckpt/merge raises (documented in docs/merge.md). */
export type MergeErrorCode =
  // the request itself
  | "MERGE_BAD_REQUEST"
  | "MERGE_BAD_OUT_PATH"
  | "MERGE_ITERATION_MISMATCH"
  | "MERGE_BAD_DIAG_PATH"
  // the inputs, checked from their headers before anything is written
  | "MERGE_INPUT_UNREADABLE"
  | "MERGE_EXPERT_LAYOUT"
  | "MERGE_EMPTY_MODEL"
  | "MERGE_KEY_MISSING"
  | "MERGE_KEY_EXTRA"
  | "MERGE_SHAPE_MISMATCH"
  | "MERGE_DTYPE_MISMATCH"
  | "MERGE_DTYPE_UNSUPPORTED"
  // what is already at the output
  | "MERGE_DIFFERENT_REQUEST"
  | "MERGE_OTHER_TOOL_VERSION"
  | "MERGE_FOREIGN_ARTIFACT"
  | "MERGE_FOREIGN_FILES"
  | "MERGE_OUTPUT_LOCKED"
  // the build
  | "MERGE_INPUT_CHANGED"
  | "MERGE_VERIFY_FAILED"
  | "MERGE_ABORTED"
  // the disk holding the output (or the external diagnostics) is full
  | "MERGE_NO_SPACE";

/**
 * The one error class of @ckpt/merge: a stable `code`, a `kind` saying what the caller can do, the
 * file it is about and, for a tensor disagreement, the tensor's key.
 */
export class MergeError extends CkptError<MergeErrorCode> {
  override readonly name = "MergeError";
  readonly file: string | undefined;
  readonly tensor: string | undefined;

  constructor(
    code: MergeErrorCode,
    message: string,
    options: { kind: ErrorKind; file?: string; tensor?: string; cause?: unknown },
  ) {
    super(code, message, options);
    this.file = options.file;
    this.tensor = options.tensor;
  }
}
