import { CkptError, type ErrorKind, truncateForMessage } from "@ckpt/errors";

export type { ErrorKind } from "@ckpt/errors";

/** Every code @ckpt/hf-conversion raises (documented in docs/hf-conversion.md). */
export type HfConversionErrorCode =
  // the request itself
  | "MATERIALIZE_BAD_OPTION"
  // the base, read alone before anything is written (preflight)
  | "MATERIALIZE_BASE_UNREADABLE"
  | "MATERIALIZE_BASE_INDEX"
  | "MATERIALIZE_BASE_SHARD"
  | "MATERIALIZE_BASE_SIDECAR"
  | "MATERIALIZE_BASE_TEMPLATE"
  // the source model.pt
  | "MATERIALIZE_SOURCE_NOT_ARTIFACT"
  | "MATERIALIZE_SOURCE_UNREADABLE"
  | "MATERIALIZE_SOURCE_MISMATCH"
  | "MATERIALIZE_SOURCE_CHANGED"
  // key accounting and expert layout rules, decided before the staging directory exists
  | "MATERIALIZE_RULE_INVALID"
  | "MATERIALIZE_KEY_MISSING"
  | "MATERIALIZE_KEY_EXTRA"
  | "MATERIALIZE_SHAPE_MISMATCH"
  | "MATERIALIZE_DTYPE_UNSUPPORTED"
  | "MATERIALIZE_TENSOR_COUNT"
  // what is already at the output, decided under the lock
  | "MATERIALIZE_OUTPUT_MISMATCH"
  | "MATERIALIZE_OUTPUT_FOREIGN"
  | "MATERIALIZE_PREVIOUS_LEFTOVER"
  | "MATERIALIZE_STAGED_OTHER_REQUEST"
  | "MATERIALIZE_STAGED_RECOVERY_FAILED"
  | "MATERIALIZE_LOCKED"
  | "MATERIALIZE_LOCK_LOST"
  // the staged build
  | "MATERIALIZE_VERIFY_FAILED"
  | "MATERIALIZE_LOADER_CHECK_FAILED"
  | "MATERIALIZE_BUILD_FAILED"
  | "MATERIALIZE_ABORTED"
  // the disk holding <out> is full
  | "MATERIALIZE_NO_SPACE";

/** A step of a materialize run, named in errors so an operator knows how far it got. */
export type MaterializeStage =
  | "preflight"
  | "lock"
  | "inspect-output"
  | "recover"
  | "source"
  | "plan"
  | "fetch"
  | "convert"
  | "sidecars"
  | "verify"
  | "loader-check"
  | "mark"
  | "swap"
  | "cleanup";

/**
 * The one error class of @ckpt/hf-conversion: a stable `code`, a `kind` saying what the caller can
 * do, the file (and tensor key) it is about, and the stage of the run it happened in.
 */
export class HfConversionError extends CkptError<HfConversionErrorCode> {
  override readonly name = "HfConversionError";
  readonly file: string | undefined;
  readonly key: string | undefined;
  stage: MaterializeStage | undefined;
  /** Every problem found when one error reports several (preflight, verification). */
  readonly problems: readonly string[];

  constructor(
    code: HfConversionErrorCode,
    message: string,
    options: {
      kind: ErrorKind;
      file?: string;
      key?: string;
      stage?: MaterializeStage;
      problems?: readonly string[];
      cause?: unknown;
    },
  ) {
    super(code, message, options);
    this.file = options.file;
    this.key = options.key;
    this.stage = options.stage;
    this.problems = options.problems ?? [message];
  }
}

/**
 * A refusal in the one message family the materializer uses: `REFUSED: <what was found>; <what
 * the build would have done with it>. <remedy>`.
 */
export function refusal(
  code: HfConversionErrorCode,
  found: string,
  consequence: string,
  remedy: string,
  options: {
    file?: string;
    key?: string;
    kind?: ErrorKind;
    problems?: readonly string[];
    cause?: unknown;
  } = {},
): HfConversionError {
  return new HfConversionError(code, `REFUSED: ${found}; ${consequence}. ${remedy}`, {
    ...options,
    kind: options.kind ?? "refused",
  });
}

/**
 * MATERIALIZE_NO_SPACE: what did not fit (`words`, in @ckpt/errors' no-space words), and that
 * `<out>` is as it was.
 */
export function noSpace(
  words: string,
  path: string,
  stage: MaterializeStage,
  cause?: unknown,
): HfConversionError {
  return new HfConversionError(
    "MATERIALIZE_NO_SPACE",
    `materialize: ${words}; nothing under the final name changed; free space and run again.`,
    { kind: "failed", file: path, stage, ...(cause === undefined ? {} : { cause }) },
  );
}

/** Quotes an untrusted name for a message: JSON string syntax, cut to a bounded length. */
export function quote(text: string, limit = 120): string {
  return truncateForMessage(text, limit);
}
