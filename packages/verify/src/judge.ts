import type { TensorProblemCode } from "@ckpt/tensors";

/**
 * The closed set of problems local verification reports beyond the tensor-level ones
 * (`TENSOR_PROBLEM_CODES` of @ckpt/tensors). Documented in docs/troubleshooting.md.
 */
export const LOCAL_PROBLEM_CODES = [
  /** A file a record describes is not there (and no receipt says it was released after archiving). */
  "VERIFY_FILE_MISSING",
  /** Something other than a regular file is where a record describes one. */
  "VERIFY_FILE_NOT_REGULAR",
  /** The file's size differs from the record's. */
  "VERIFY_SIZE_MISMATCH",
  /** The file's SHA-256 differs from the record's. */
  "VERIFY_DIGEST_MISMATCH",
  /**
   * A `.pt` file's or DCP directory's tensors (names, dtypes, shapes, read from its pickle or
   * `.metadata`) are not the ones the checkpoint description records.
   */
  "VERIFY_TENSORS_MISMATCH",
  /** A file inside a component directory that the artifact manifest does not list. */
  "VERIFY_FILE_UNLISTED",
  /** A ckpt record (manifest, receipt, fetch record, control manifest, _SUCCESS, ...) cannot be read or validated. */
  "VERIFY_RECORD_INVALID",
  /** A record names another iteration than its `iter_*` directory. */
  "VERIFY_ITERATION_MISMATCH",
  /** A `checkpoint_artifacts/iter_*` directory without its native manifest: an unfinished artifact. */
  "VERIFY_ARTIFACT_UNCOMMITTED",
  /** A fetch record with `complete: false`: the staging was interrupted. */
  "VERIFY_STAGE_INCOMPLETE",
  /** The staged manifest is not the one the fetch record names as its source. */
  "VERIFY_STAGE_SOURCE_MISMATCH",
  /** A full checkpoint lacks a component it needs (weights, trainer state, a role, a DCP directory). */
  "VERIFY_COMPONENT_MISSING",
  /** A component is present both as `<name>.pt` and as `<name>/`. */
  "VERIFY_COMPONENT_AMBIGUOUS",
] as const;

export type LocalProblemCode = (typeof LOCAL_PROBLEM_CODES)[number];

/** One thing wrong with a local checkpoint directory; paths are relative to it. */
export interface LocalProblem {
  readonly code: LocalProblemCode | TensorProblemCode;
  readonly path: string;
  readonly message: string;
  /** The record whose description the file contradicts (e.g. `.posttrain-checkpoint-artifact.json`). */
  readonly record?: string;
  /** The underlying error code, when the problem came from one. */
  readonly cause?: string;
  readonly tensor?: string;
  /** The DCP chunk concerned (its offsets in the tensor's global shape). */
  readonly chunk?: readonly number[];
}

/** What a record says a file is. */
export interface Expectation {
  readonly path: string;
  readonly size: number;
  readonly sha256?: string;
  /** The record that says so. */
  readonly record: string;
}

/** What is on disk at a path (digest only when it was hashed). */
export interface Observation {
  readonly kind: "file" | "dir" | "other" | "absent";
  readonly size?: number;
  readonly sha256?: string;
}

export interface ExpectationJudgement {
  readonly problems: LocalProblem[];
  /** Paths absent locally that the archive receipt records: released after archiving, not lost. */
  readonly released: string[];
  /** Paths whose records carry no digest: only their size was checked. */
  readonly sizeOnly: string[];
}

/**
 * Compares what records say with what is on disk. `receipt` is the archive receipt's inventory
 * (undefined without one): a file absent locally that it records with the same size (and digest,
 * where both are known) was released after archiving and is not a problem. One problem per path
 * and code, naming the first record that disagrees. Pure.
 */
export function judgeExpectations(
  expectations: readonly Expectation[],
  observed: ReadonlyMap<string, Observation>,
  receipt: ReadonlyMap<string, { size: number; sha256?: string }> | undefined,
  receiptName: string,
): ExpectationJudgement {
  const problems: LocalProblem[] = [];
  const released = new Set<string>();
  const sizeOnly = new Set<string>();
  const seen = new Set<string>();
  const add = (problem: LocalProblem) => {
    const key = `${problem.path}\u0000${problem.code}`;
    if (seen.has(key)) return;
    seen.add(key);
    problems.push(problem);
  };
  for (const e of expectations) {
    const o = observed.get(e.path) ?? { kind: "absent" };
    if (o.kind === "absent") {
      const archived = receipt?.get(e.path);
      const covered =
        e.record === receiptName ||
        (archived !== undefined &&
          archived.size === e.size &&
          (archived.sha256 === undefined || e.sha256 === undefined || archived.sha256 === e.sha256));
      if (covered) released.add(e.path);
      else {
        add({
          code: "VERIFY_FILE_MISSING",
          path: e.path,
          record: e.record,
          message: `${e.path} is missing; ${e.record} records it (${e.size} bytes)${archived === undefined ? "" : `, and the receipt records other bytes`}`,
        });
      }
      continue;
    }
    if (o.kind !== "file") {
      add({
        code: "VERIFY_FILE_NOT_REGULAR",
        path: e.path,
        record: e.record,
        message: `${e.path} is a ${o.kind === "dir" ? "directory" : "special file or link"}; ${e.record} records a file`,
      });
      continue;
    }
    if (o.size !== e.size) {
      add({
        code: "VERIFY_SIZE_MISMATCH",
        path: e.path,
        record: e.record,
        message: `${e.path} is ${o.size} bytes; ${e.record} records ${e.size}`,
      });
      continue;
    }
    if (e.sha256 === undefined) {
      sizeOnly.add(e.path);
      continue;
    }
    if (o.sha256 !== undefined && o.sha256 !== e.sha256) {
      add({
        code: "VERIFY_DIGEST_MISMATCH",
        path: e.path,
        record: e.record,
        message: `${e.path} has sha256 ${o.sha256}; ${e.record} records ${e.sha256}`,
      });
    }
  }
  // A file whose digest another record checks is not "size only".
  for (const e of expectations) if (e.sha256 !== undefined) sizeOnly.delete(e.path);
  return { problems, released: [...released].sort(), sizeOnly: [...sizeOnly].sort() };
}
