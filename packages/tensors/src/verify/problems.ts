import { DCP_COMPLETENESS_CODES } from "../dcp/completeness.js";

/**
 * The closed set of problems the tensor-level verifiers report. A verifier never invents another
 * code: an underlying error's own code goes into `cause`. Documented in docs/troubleshooting.md.
 */
export const TENSOR_PROBLEM_CODES = [
  /** The file cannot be read as its format (truncated, corrupt header or directory, unreadable). */
  "FILE_UNREADABLE",
  /** A torch.save zip member's bytes fail their CRC-32 (only with `crc: true`). */
  "FILE_CRC_MISMATCH",
  /** A floating tensor holds NaN or ±Inf (only with `finite: true`). */
  "TENSOR_NOT_FINITE",
  /** A DCP directory's `.metadata` is missing or cannot be read. */
  "DCP_METADATA_UNREADABLE",
  /** The DCP completeness problems (`DCP_COMPLETENESS_CODES`: missing, short or unreferenced shards, duplicate, overlapping, missing or unstored chunks). */
  ...DCP_COMPLETENESS_CODES,
] as const;

export type TensorProblemCode = (typeof TENSOR_PROBLEM_CODES)[number];

/** One thing wrong with a tensor file or DCP directory. */
export interface TensorProblem {
  readonly code: TensorProblemCode;
  /** The file concerned, relative to the directory checked (a single file: its name). */
  readonly path: string;
  readonly message: string;
  /** The underlying error code (e.g. `ZIP_EOCD_MISSING`) when the problem came from one. */
  readonly cause?: string;
  /** The tensor concerned, when there is one. */
  readonly tensor?: string;
  /** The DCP chunk concerned (its offsets in the tensor's global shape), when there is one. */
  readonly chunk?: readonly number[];
}
