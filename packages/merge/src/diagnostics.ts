import { canonicalJson } from "@ckpt/manifest";
import type { TensorStats } from "./internal/kernel.js";
import type { MergePlan } from "./plan.js";
import type { MergeMode } from "./request.js";

export const MERGE_DIAGNOSTICS_SCHEMA = "ckpt.merge-diagnostics.v1";

/** Norms and cosines of one tensor (or, in `totals`, of all tensors as one vector). */
export interface DeltaDiagnostics {
  /**
   * Per expert, in request order: ‖expertₖ − base‖ (its task vector) with a base, else
   * ‖expertₖ − merged‖ (its distance from the average). Null when not finite (NaN or Inf inputs).
   */
  readonly expert_delta_norm: (number | null)[];
  /** ‖merged − base‖ of the values written, with a base; else null. */
  readonly merged_delta_norm: number | null;
  /** cos(τᵢ, τⱼ) between the experts' task vectors, with a base; null for a zero vector, and without a base. */
  readonly cosine: (number | null)[][] | null;
  /** Merged values that are NaN or ±Inf. */
  readonly nonfinite: number;
}

export interface TensorDiagnostics extends DeltaDiagnostics {
  readonly name: string;
  readonly dtype: string;
  readonly shape: number[];
}

/** The diagnostics file a merge writes (`merge-diagnostics.json` by default). */
export interface MergeDiagnosticsFile {
  readonly schema: typeof MERGE_DIAGNOSTICS_SCHEMA;
  readonly tool_version: string;
  readonly mode: MergeMode;
  readonly lam: number | null;
  /** What the expert deltas are measured from. */
  readonly reference: "base" | "merged";
  readonly experts: string[];
  readonly base: string | null;
  readonly totals: DeltaDiagnostics;
  readonly tensors: TensorDiagnostics[];
}

/** A finite value, or null (JSON has no NaN or infinity). */
const finite = (value: number): number | null => (Number.isFinite(value) ? value : null);

function describe(stats: TensorStats, experts: number, withBase: boolean): DeltaDiagnostics {
  const norms = Array.from(stats.expertSq, (sq) => Math.sqrt(sq));
  let cosine: (number | null)[][] | null = null;
  if (withBase) {
    cosine = norms.map((n) => norms.map(() => (n > 0 && Number.isFinite(n) ? 1 : null)));
    let pair = 0;
    for (let i = 0; i < experts; i++) {
      for (let j = i + 1; j < experts; j++) {
        const value = finite(stats.dots[pair++]! / Math.sqrt(stats.expertSq[i]! * stats.expertSq[j]!));
        cosine[i]![j] = value;
        cosine[j]![i] = value;
      }
    }
  }
  return {
    expert_delta_norm: norms.map(finite),
    merged_delta_norm: withBase ? finite(Math.sqrt(stats.mergedSq)) : null,
    cosine,
    nonfinite: stats.nonFinite,
  };
}

/** The diagnostics of a finished merge from its per-tensor running sums (pure). */
export function buildDiagnostics(
  plan: MergePlan,
  stats: readonly TensorStats[],
  context: {
    readonly toolVersion: string;
    readonly lam: number | null;
    readonly experts: readonly string[];
    readonly base: string | null;
  },
): MergeDiagnosticsFile {
  const totals: TensorStats = {
    expertSq: new Float64Array(plan.experts),
    dots: new Float64Array((plan.experts * (plan.experts - 1)) / 2),
    mergedSq: 0,
    nonFinite: 0,
  };
  for (const s of stats) {
    s.expertSq.forEach((v, i) => {
      totals.expertSq[i]! += v;
    });
    s.dots.forEach((v, i) => {
      totals.dots[i]! += v;
    });
    totals.mergedSq += s.mergedSq;
    totals.nonFinite += s.nonFinite;
  }
  return {
    schema: MERGE_DIAGNOSTICS_SCHEMA,
    tool_version: context.toolVersion,
    mode: plan.mode,
    lam: context.lam,
    reference: plan.withBase ? "base" : "merged",
    experts: [...context.experts],
    base: context.base,
    totals: describe(totals, plan.experts, plan.withBase),
    tensors: plan.tensors.map((t, i) => ({
      name: t.name,
      dtype: t.dtype,
      shape: [...t.shape],
      ...describe(stats[i]!, plan.experts, plan.withBase),
    })),
  };
}

/** Canonical bytes of a diagnostics file (sorted keys, final newline): equal merges give equal bytes. */
export function serializeDiagnostics(file: MergeDiagnosticsFile): string {
  return canonicalJson(file);
}
