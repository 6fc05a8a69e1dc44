import { checkHfDirectory, HF_DIRECTORY_PROBLEM_CODES } from "@ckpt/hf-conversion";
import type { Destination } from "@ckpt/manifest";
import { TENSOR_PROBLEM_CODES, verifyDcpDirectory, verifyTensorFile } from "@ckpt/tensors";
import { LOCAL_PROBLEM_CODES, type LocalProblem } from "./judge.js";
import { detectVerifyKind, type VerifyKind } from "./kind.js";
import {
  type LocalVerifyReport,
  verifyArtifactDir,
  verifyCheckpointDir,
  verifyMaterializedDir,
  verifyStagedDir,
} from "./local.js";

/** One problem as the report lists it: a code from `VERIFY_REPORT_PROBLEM_CODES`, the file, what is wrong. */
export interface VerifyProblem {
  readonly code: string;
  readonly path: string;
  readonly message: string;
  readonly record?: string;
  readonly cause?: string;
  readonly tensor?: string;
  /** The DCP chunk concerned (its offsets in the tensor's global shape). */
  readonly chunk?: readonly number[];
}

/** The report of `verifyPath` (`ckpt verify --json`; schema-versioned, evidence bundles embed it). */
export interface VerifyReport {
  readonly schema: "ckpt.verify-report.v1";
  readonly ok: boolean;
  readonly kind: VerifyKind;
  readonly path: string;
  readonly iteration: number | null;
  readonly checks: { readonly finite: boolean; readonly deep: boolean };
  readonly problems: readonly VerifyProblem[];
  readonly released: readonly string[];
  readonly size_only: readonly string[];
  /**
   * A full checkpoint's retention state (null for other kinds): whether it holds optimizer state,
   * and the recorded optimizer files retention (`keep_optim_last`) released as a whole, which are
   * not problems (`run status` and `evidence` show the same state).
   */
  readonly retention: {
    readonly has_optimizer: boolean;
    readonly optimizer_released: readonly string[];
  } | null;
  readonly notes: readonly string[];
  readonly hashed: { readonly files: number; readonly bytes: number };
  /** The archive a receipt binds (check it with `ckpt artifact verify`). */
  readonly archive: Destination | null;
  /** Tensors listed (files, HF and DCP directories), when known. */
  readonly tensors: number | null;
}

/**
 * The closed set of problem codes a verify report can hold: the local-verification codes, the
 * tensor-level codes of @ckpt/tensors and the Hugging Face directory codes of @ckpt/hf-conversion.
 */
export const VERIFY_REPORT_PROBLEM_CODES: readonly string[] = [
  ...LOCAL_PROBLEM_CODES,
  ...TENSOR_PROBLEM_CODES,
  ...HF_DIRECTORY_PROBLEM_CODES,
];

export interface VerifyPathOptions {
  /** Judge the path as this kind instead of detecting it (`detectVerifyKind`). */
  readonly kind?: VerifyKind;
  /** Scan every floating tensor of `.pt`/`.safetensors` files for NaN/±Inf. */
  readonly finite?: boolean;
  /** Read every byte of `.pt` files and check each zip member's CRC-32. */
  readonly deep?: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (event: { path: string; doneBytes: number; totalBytes: number }) => void;
}

function fromLocal(
  kind: VerifyKind,
  report: LocalVerifyReport,
  checks: VerifyReport["checks"],
): VerifyReport {
  return {
    schema: "ckpt.verify-report.v1",
    ok: report.ok,
    kind,
    path: report.path,
    iteration: report.iteration ?? null,
    checks,
    problems: report.problems.map(problemOf),
    released: report.released,
    size_only: report.sizeOnly,
    retention:
      report.retention === undefined
        ? null
        : {
            has_optimizer: report.retention.hasOptimizer,
            optimizer_released: report.retention.optimizerReleased,
          },
    notes: report.notes,
    hashed: { files: report.hashedFiles, bytes: report.hashedBytes },
    archive: report.archive ?? null,
    tensors: null,
  };
}

function problemOf(p: LocalProblem | VerifyProblem): VerifyProblem {
  const { code, path, message, record, cause, tensor, chunk } = p;
  return {
    code,
    path,
    message,
    ...(record === undefined ? {} : { record }),
    ...(cause === undefined ? {} : { cause }),
    ...(tensor === undefined ? {} : { tensor }),
    ...(chunk === undefined ? {} : { chunk }),
  };
}

function emptyReport(kind: VerifyKind, path: string, checks: VerifyReport["checks"]): VerifyReport {
  return {
    schema: "ckpt.verify-report.v1",
    ok: true,
    kind,
    path,
    iteration: null,
    checks,
    problems: [],
    released: [],
    size_only: [],
    retention: null,
    notes: [],
    hashed: { files: 0, bytes: 0 },
    archive: null,
    tensors: null,
  };
}

/**
 * Judges a path against its own records as `options.kind` (else the kind `detectVerifyKind`
 * gives) and assembles one report: what is wrong is a problem in it, never a throw. Throws only
 * when the path cannot be judged at all (`VERIFY_PATH_MISSING`, `VERIFY_UNKNOWN_KIND`) or on I/O
 * failures of the directory itself.
 */
export async function verifyPath(path: string, options: VerifyPathOptions = {}): Promise<VerifyReport> {
  const kind = options.kind ?? (await detectVerifyKind(path));
  const checks = { finite: options.finite ?? false, deep: options.deep ?? false };
  const local = {
    finite: checks.finite,
    crc: checks.deep,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  };
  switch (kind) {
    case "artifact":
      return fromLocal(kind, await verifyArtifactDir(path, local), checks);
    case "stage":
      return fromLocal(kind, await verifyStagedDir(path, local), checks);
    case "checkpoint":
      return fromLocal(kind, await verifyCheckpointDir(path, local), checks);
    case "torch":
    case "safetensors": {
      const file = await verifyTensorFile(path, { ...local, format: kind });
      const problems = file.problems.map(problemOf);
      return {
        ...emptyReport(kind, path, checks),
        ok: problems.length === 0,
        problems,
        notes: file.notes,
        tensors: file.tensors ?? null,
      };
    }
    case "dcp": {
      const dcp = await verifyDcpDirectory(path);
      const notes = checks.finite
        ? ["DCP shards are checked for presence and length; their tensors are not scanned for NaN/Inf"]
        : [];
      const problems = dcp.problems.map(problemOf);
      return {
        ...emptyReport(kind, path, checks),
        ok: problems.length === 0,
        problems,
        notes,
        tensors: dcp.tensors,
      };
    }
    case "hf": {
      const structure = await checkHfDirectory(path);
      const recorded = fromLocal(kind, await verifyMaterializedDir(path, local), checks);
      const problems = [
        ...structure.problems.map((p) => ({ code: p.code, path: p.file, message: p.message })),
        ...recorded.problems,
      ];
      return { ...recorded, ok: problems.length === 0, problems, tensors: structure.tensorCount };
    }
  }
}
