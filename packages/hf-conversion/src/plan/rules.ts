import { HfConversionError, quote } from "../errors.js";

/**
 * How a 2-D expert matrix is stored. `out_in` is `nn.Linear.weight`'s `[out, in]`; `in_out` is its
 * transpose `[in, out]` (what `x @ W` kernels keep).
 */
export type MatrixOrientation = "out_in" | "in_out";

/**
 * One kind of tensor holding routed-expert matrices. `key` is a pattern: `{prefix}` stands for the
 * module path the rule is applied at (for example `model.layers.3.mlp.experts`) and `{expert}` for
 * the expert index. A `stacked` tensor holds every expert, expert index first (`[E, ...]`), and its
 * key has no `{expert}`; a per-expert tensor holds one and its key has `{expert}`. `parts` are the
 * matrices it holds, fused along the output axis in this order (`["gate", "up"]`: the gate half,
 * then the up half); parts fused in one tensor have the same shape.
 */
export interface ExpertTensorGroup {
  readonly key: string;
  readonly stacked: boolean;
  readonly parts: readonly string[];
  readonly orientation: MatrixOrientation;
}

/**
 * A declarative conversion between the checkpoint's expert layout and the base's: each side lists
 * the tensor groups holding the same set of parts. Applied wherever the base's index has keys
 * matching the base side, and checked against the base's shapes and the checkpoint's tensors.
 */
export interface ExpertLayoutRule {
  readonly name: string;
  readonly checkpoint: readonly ExpertTensorGroup[];
  readonly base: readonly ExpertTensorGroup[];
}

const PER_EXPERT_GATE_UP_DOWN: readonly ExpertTensorGroup[] = [
  { key: "{prefix}.{expert}.gate_proj.weight", stacked: false, parts: ["gate"], orientation: "out_in" },
  { key: "{prefix}.{expert}.up_proj.weight", stacked: false, parts: ["up"], orientation: "out_in" },
  { key: "{prefix}.{expert}.down_proj.weight", stacked: false, parts: ["down"], orientation: "out_in" },
];
const STACKED_FUSED_GATE_UP_DOWN: readonly ExpertTensorGroup[] = [
  { key: "{prefix}.gate_up_proj", stacked: true, parts: ["gate", "up"], orientation: "in_out" },
  { key: "{prefix}.down_proj", stacked: true, parts: ["down"], orientation: "in_out" },
];
// transformers 5's fused expert modules hold the stack in `nn.Linear` orientation: the same keys
// as the stacked fused layout, each matrix transposed (`gate_up_proj [E, 2I, H]`, `down_proj [E, H, I]`).
const TRANSFORMERS_FUSED_GATE_UP_DOWN: readonly ExpertTensorGroup[] = STACKED_FUSED_GATE_UP_DOWN.map(
  (group) => ({ ...group, orientation: "out_in" }),
);

/**
 * The rules `ckpt materialize-hf` applies: Hugging Face's per-expert MoE keys (Qwen3-MoE style:
 * `experts.E.{gate,up,down}_proj.weight`, `[out, in]`) and the stacked fused layout grouped-GEMM
 * trainers and Qwen3-VL-MoE keep (`experts.gate_up_proj [E, in, 2·out]`, `experts.down_proj
 * [E, in, out]`), in both directions; and the state dict of transformers 5's fused modules
 * (`[E, 2·out, in]`, `[E, out, in]`) into either. A base and checkpoint with the same layout need
 * no rule. The fused and stacked layouts share key names: shapes tell them apart.
 */
export const BUILTIN_EXPERT_RULES: readonly ExpertLayoutRule[] = [
  {
    name: "stacked-fused-to-per-expert",
    checkpoint: STACKED_FUSED_GATE_UP_DOWN,
    base: PER_EXPERT_GATE_UP_DOWN,
  },
  {
    name: "per-expert-to-stacked-fused",
    checkpoint: PER_EXPERT_GATE_UP_DOWN,
    base: STACKED_FUSED_GATE_UP_DOWN,
  },
  {
    name: "transformers-fused-to-per-expert",
    checkpoint: TRANSFORMERS_FUSED_GATE_UP_DOWN,
    base: PER_EXPERT_GATE_UP_DOWN,
  },
  {
    name: "transformers-fused-to-stacked-fused",
    checkpoint: TRANSFORMERS_FUSED_GATE_UP_DOWN,
    base: STACKED_FUSED_GATE_UP_DOWN,
  },
];

/** A group with its key pattern compiled. */
export interface CompiledGroup extends ExpertTensorGroup {
  readonly pattern: RegExp;
}

export interface CompiledRule {
  readonly name: string;
  readonly checkpoint: readonly CompiledGroup[];
  readonly base: readonly CompiledGroup[];
  /** Every part, in first-appearance order on the base side. */
  readonly parts: readonly string[];
}

function invalid(rule: string, what: string): HfConversionError {
  return new HfConversionError(
    "MATERIALIZE_RULE_INVALID",
    `expert layout rule ${quote(rule)}: ${what}. See docs/hf-conversion.md for the rule format.`,
    { kind: "input" },
  );
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function compileGroup(rule: string, group: ExpertTensorGroup): CompiledGroup {
  const count = (token: string) => group.key.split(token).length - 1;
  if (count("{prefix}") !== 1)
    throw invalid(rule, `key ${quote(group.key)} must contain {prefix} exactly once`);
  const experts = count("{expert}");
  if (group.stacked ? experts !== 0 : experts !== 1) {
    throw invalid(
      rule,
      `key ${quote(group.key)} must ${group.stacked ? "not contain {expert} (it is stacked)" : "contain {expert} exactly once"}`,
    );
  }
  if (group.parts.length === 0 || new Set(group.parts).size !== group.parts.length) {
    throw invalid(rule, `key ${quote(group.key)} must list distinct parts`);
  }
  if (group.orientation !== "out_in" && group.orientation !== "in_out") {
    throw invalid(
      rule,
      `key ${quote(group.key)} has orientation ${quote(String(group.orientation))}; use out_in or in_out`,
    );
  }
  const source = escapeRegExp(group.key)
    .replace(escapeRegExp("{prefix}"), "(?<prefix>.+)")
    .replace(escapeRegExp("{expert}"), "(?<expert>0|[1-9][0-9]{0,8})");
  return { ...group, pattern: new RegExp(`^${source}$`) };
}

/** Checks a rule's shape and compiles its key patterns. Pure. */
export function compileRule(rule: ExpertLayoutRule): CompiledRule {
  if (typeof rule.name !== "string" || rule.name === "")
    throw invalid(String(rule.name), "a rule needs a name");
  if (rule.base.length === 0 || rule.checkpoint.length === 0)
    throw invalid(rule.name, "both sides need a tensor group");
  const base = rule.base.map((g) => compileGroup(rule.name, g));
  const checkpoint = rule.checkpoint.map((g) => compileGroup(rule.name, g));
  const partsOf = (groups: readonly CompiledGroup[], side: string) => {
    const seen: string[] = [];
    for (const g of groups) {
      for (const p of g.parts) {
        if (seen.includes(p)) throw invalid(rule.name, `part ${quote(p)} appears twice on the ${side} side`);
        seen.push(p);
      }
    }
    return seen;
  };
  const parts = partsOf(base, "base");
  const ckptParts = partsOf(checkpoint, "checkpoint");
  if (parts.length !== ckptParts.length || !parts.every((p) => ckptParts.includes(p))) {
    throw invalid(
      rule.name,
      `the sides hold different parts (base ${parts.join(", ")}; checkpoint ${ckptParts.join(", ")})`,
    );
  }
  return { name: rule.name, checkpoint, base, parts };
}

/** The key of `group` at `prefix` (and `expert`, for a per-expert group). */
export function groupKey(group: ExpertTensorGroup, prefix: string, expert?: number): string {
  const key = group.key.replace("{prefix}", prefix);
  return group.stacked ? key : key.replace("{expert}", String(expert));
}

/** Size of one part's matrix: `out` rows and `in` columns in `out_in` orientation. */
export interface PartDims {
  readonly out: number;
  readonly in: number;
}

/** The per-expert matrix shape of a group holding `parts` parts of `dims`. */
export function matrixShape(group: ExpertTensorGroup, dims: PartDims): [number, number] {
  const outTotal = dims.out * group.parts.length;
  return group.orientation === "out_in" ? [outTotal, dims.in] : [dims.in, outTotal];
}

/** The part dims a group's per-expert matrix shape implies, or undefined when the parts cannot split it. */
export function partDimsOf(group: ExpertTensorGroup, matrix: readonly number[]): PartDims | undefined {
  if (matrix.length !== 2) return undefined;
  const [a, b] = matrix as [number, number];
  const outTotal = group.orientation === "out_in" ? a : b;
  const inDim = group.orientation === "out_in" ? b : a;
  if (outTotal % group.parts.length !== 0) return undefined;
  return { out: outTotal / group.parts.length, in: inDim };
}

/**
 * Element index of `(o, i)` of part `part` (its index within the group) inside one expert's
 * matrix of `group`. The definition the converter's copy loops and the verifier's sampled
 * checks are both measured against.
 */
export function elementIndex(
  group: ExpertTensorGroup,
  dims: PartDims,
  part: number,
  o: number,
  i: number,
): number {
  return group.orientation === "out_in"
    ? (part * dims.out + o) * dims.in + i
    : i * (group.parts.length * dims.out) + part * dims.out + o;
}

/** The group of `groups` holding `part`, and the part's index within it. */
export function partHome<G extends ExpertTensorGroup>(
  groups: readonly G[],
  part: string,
): { group: G; index: number } {
  for (const group of groups) {
    const index = group.parts.indexOf(part);
    if (index >= 0) return { group, index };
  }
  throw new Error(`part ${part} is on no group of the rule (compileRule checks this)`);
}
