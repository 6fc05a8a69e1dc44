import { type DType, dtypeSize } from "@ckpt/tensors";
import { MergeError, type MergeErrorCode } from "./errors.js";
import type { MergeMode } from "./request.js";

/** Element types a merge accumulates: floating point. The output keeps the inputs' dtype. */
export const MERGEABLE_DTYPES: readonly DType[] = ["BF16", "F16", "F32"];

/** One tensor as an input's header lists it. */
export interface TensorListing {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/** An input's tensors (an expert file or the base directory), named by `file` in refusals. */
export interface InputListing {
  readonly file: string;
  readonly tensors: readonly TensorListing[];
}

export interface PlannedTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly numel: number;
  readonly byteLength: number;
}

/** What will be merged, decided from headers alone: the tensors in output order. */
export interface MergePlan {
  readonly mode: MergeMode;
  readonly experts: number;
  readonly withBase: boolean;
  readonly tensors: readonly PlannedTensor[];
  /** Bytes of the merged tensors (the output's payload). */
  readonly totalBytes: number;
  readonly largestBytes: number;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

function refuse(code: MergeErrorCode, file: string, tensor: string, message: string): never {
  throw new MergeError(code, message, { kind: "input", file, tensor });
}

const shapeText = (shape: readonly number[]) => `[${shape.join(", ")}]`;

/**
 * Checks that every input holds exactly the first expert's keys with the same shapes and dtypes,
 * and returns the tensors to merge in the first expert's order. Pure: it sees headers only, so a
 * refusal comes before anything is read or written. The first disagreement is refused by key.
 */
export function planMerge(mode: MergeMode, experts: readonly InputListing[], base?: InputListing): MergePlan {
  const first = experts[0];
  if (first === undefined) {
    throw new MergeError(
      "MERGE_BAD_REQUEST",
      "merge: no experts given. Pass --experts a/model.pt,b/model.pt.",
      { kind: "input" },
    );
  }
  if (mode === "tv" && base === undefined) {
    throw new MergeError("MERGE_BAD_REQUEST", "merge: --mode tv needs a base. Pass --base <hf-dir>.", {
      kind: "input",
    });
  }
  if (first.tensors.length === 0) {
    throw new MergeError(
      "MERGE_EMPTY_MODEL",
      `merge: expert ${first.file} holds no tensors. Check that it is a consolidated model checkpoint.`,
      { kind: "input", file: first.file },
    );
  }
  const reference = new Map<string, TensorListing>();
  for (const t of first.tensors) {
    if (!MERGEABLE_DTYPES.includes(t.dtype)) {
      refuse(
        "MERGE_DTYPE_UNSUPPORTED",
        first.file,
        t.name,
        `merge: tensor ${t.name} of ${first.file} is ${t.dtype}; only ${MERGEABLE_DTYPES.join(", ")} tensors can be averaged. Remove it from the experts or merge it separately.`,
      );
    }
    reference.set(t.name, t);
  }
  const others: { input: InputListing; role: string }[] = [
    ...experts.slice(1).map((input, i) => ({ input, role: `expert ${i + 2}` })),
    ...(base === undefined ? [] : [{ input: base, role: "the base" }]),
  ];
  for (const { input, role } of others) {
    const seen = new Set<string>();
    for (const t of input.tensors) {
      const want = reference.get(t.name);
      if (want === undefined) {
        refuse(
          "MERGE_KEY_EXTRA",
          input.file,
          t.name,
          `merge: ${role} (${input.file}) holds tensor ${t.name}, which expert 1 (${first.file}) does not. Every input must hold the same keys.`,
        );
      }
      if (!sameShape(t.shape, want.shape)) {
        refuse(
          "MERGE_SHAPE_MISMATCH",
          input.file,
          t.name,
          `merge: tensor ${t.name} is ${shapeText(t.shape)} in ${role} (${input.file}) but ${shapeText(want.shape)} in expert 1 (${first.file}).`,
        );
      }
      if (t.dtype !== want.dtype) {
        refuse(
          "MERGE_DTYPE_MISMATCH",
          input.file,
          t.name,
          `merge: tensor ${t.name} is ${t.dtype} in ${role} (${input.file}) but ${want.dtype} in expert 1 (${first.file}). Convert the inputs to one dtype first.`,
        );
      }
      seen.add(t.name);
    }
    if (seen.size !== reference.size) {
      const missing = first.tensors.find((t) => !seen.has(t.name))!;
      refuse(
        "MERGE_KEY_MISSING",
        input.file,
        missing.name,
        `merge: ${role} (${input.file}) lacks tensor ${missing.name}, which expert 1 (${first.file}) holds${seen.size + 1 < reference.size ? ` (and ${reference.size - seen.size - 1} more)` : ""}. Every input must hold the same keys.`,
      );
    }
  }
  const tensors = first.tensors.map((t) => {
    const numel = t.shape.reduce((a, b) => a * b, 1);
    return {
      name: t.name,
      dtype: t.dtype,
      shape: [...t.shape],
      numel,
      byteLength: numel * dtypeSize(t.dtype),
    };
  });
  return {
    mode,
    experts: experts.length,
    withBase: base !== undefined,
    tensors,
    totalBytes: tensors.reduce((sum, t) => sum + t.byteLength, 0),
    largestBytes: tensors.reduce((max, t) => Math.max(max, t.byteLength), 0),
  };
}
