import { CkptError, type ErrorKind } from "@ckpt/errors";

export type { ErrorKind } from "@ckpt/errors";

/** Every code @ckpt/manifest raises (documented in docs/troubleshooting.md). */
export type ManifestErrorCode =
  | "FILE_COMPARE_FAILED"
  | "FILE_NOT_REGULAR"
  | "FS_FSYNC_FAILED"
  | "FS_LIST_FAILED"
  | "FS_REMOVE_FAILED"
  | "FS_VERIFY_MISMATCH"
  | "FS_WRITE_FAILED"
  | "HASH_ABORTED"
  | "HASH_BAD_OPTION"
  | "HASH_FILE_CHANGED"
  | "HASH_READ_FAILED"
  | "HASH_SPECIAL_FILE_REFUSED"
  | "HASH_SYMLINK_REFUSED"
  | "HASH_WORKER_FAILED"
  | "JSON_BOM"
  | "JSON_DUPLICATE_KEY"
  | "JSON_NUMBER_OUT_OF_RANGE"
  | "JSON_NOT_INTEGER"
  | "JSON_SYNTAX"
  | "JSON_TOO_DEEP"
  | "JSON_TOO_LONG"
  | "JSON_TRUNCATED"
  | "LAYOUT_BAD_ITERATION"
  | "LAYOUT_BAD_ITER_DIR"
  | "LAYOUT_BAD_RUN_TS"
  | "LAYOUT_BAD_SEGMENT"
  | "LAYOUT_NOT_CHECKPOINTS_PREFIX"
  | "PATH_ABSOLUTE"
  | "PATH_BACKSLASH"
  | "PATH_CONTROL_CHAR"
  | "PATH_DOT_SEGMENT"
  | "PATH_EMPTY"
  | "PATH_EMPTY_SEGMENT"
  | "PATH_ESCAPES_ROOT"
  | "PATH_NOT_STRING"
  | "PATH_NUL"
  | "PATH_RESOLVE_FAILED"
  | "PATH_ROOT_MISSING"
  | "PATH_TOO_LONG"
  | "PATH_TRAVERSAL"
  | "RECORD_BAD_DIGEST"
  | "RECORD_BAD_POINTER"
  | "RECORD_BAD_TEXT"
  | "RECORD_CHANGED_WHILE_READING"
  | "RECORD_DUPLICATE_PATH"
  | "RECORD_INCONSISTENT"
  | "RECORD_INVALID"
  | "RECORD_INVALID_VALUE"
  | "RECORD_MISSING_DIGEST"
  | "RECORD_MISSING_FIELD"
  | "RECORD_NOT_A_FILE"
  | "RECORD_NOT_FOUND"
  | "RECORD_NOT_OBJECT"
  | "RECORD_NOT_SERIALIZABLE"
  | "RECORD_NOT_UTF8"
  | "RECORD_OUT_OF_RANGE"
  | "RECORD_READ_FAILED"
  | "RECORD_TOO_LARGE"
  | "RECORD_UNKNOWN_FIELD"
  | "RECORD_UNKNOWN_VERSION"
  | "RECORD_WRONG_COUNT"
  | "RECORD_WRONG_TYPE";

/**
 * The one error class of @ckpt/manifest. `code` is stable (documented in docs/troubleshooting.md);
 * `file` and `field` name what was wrong so a message can point at it.
 */
export class ManifestError extends CkptError<ManifestErrorCode> {
  override readonly name = "ManifestError";
  readonly file: string | undefined;
  readonly field: string | undefined;

  constructor(
    code: ManifestErrorCode,
    message: string,
    options: { kind: ErrorKind; file?: string; field?: string; cause?: unknown },
  ) {
    super(code, message, options);
    this.file = options.file;
    this.field = options.field;
  }
}
