import { type DType, isSafetensorsDType, isSubByteDType, packedByteLength } from "@ckpt/tensors";
import { quote, refusal } from "../errors.js";
import {
  BUILTIN_EXPERT_RULES,
  type CompiledGroup,
  type CompiledRule,
  compileRule,
  type ExpertLayoutRule,
  groupKey,
  matrixShape,
  type PartDims,
  partDimsOf,
} from "./rules.js";

/** A tensor of the checkpoint (its key without the `net.` prefix). */
export interface SourceTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /**
   * An earlier key viewing exactly the same stored elements (same storage, offset, strides, shape
   * and dtype): a tied weight, such as `lm_head.weight` tied to `model.embed_tokens.weight`.
   */
  readonly sameAs?: string;
}

/** A tensor of the base's layout. */
export interface LayoutTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/** A base shard: its file, header metadata and tensors in data order. */
export interface LayoutShard {
  readonly file: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly tensors: readonly LayoutTensor[];
}

/** One application of a rule at one module path. */
export interface RuleInstance {
  readonly rule: CompiledRule;
  readonly prefix: string;
  /** Routed experts. */
  readonly experts: number;
  readonly dims: ReadonlyMap<string, PartDims>;
  readonly dtype: DType;
  /** Checkpoint keys this instance consumes. */
  readonly checkpointKeys: readonly string[];
  /** Base keys it produces. */
  readonly baseKeys: readonly string[];
}

/** How one output tensor's bytes are produced. */
export type TensorRecipe =
  /** The checkpoint tensor of the same key, byte for byte. */
  | { readonly kind: "copy"; readonly source: string }
  /** Assembled from expert matrices: `group` of `instance`'s base side, one expert or all (stacked). */
  | {
      readonly kind: "experts";
      readonly instance: RuleInstance;
      readonly group: CompiledGroup;
      readonly expert: number | undefined;
    };

export interface OutputTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly byteLength: number;
  readonly recipe: TensorRecipe;
}

export interface OutputShard {
  readonly file: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly tensors: readonly OutputTensor[];
}

/**
 * A checkpoint key dropped as a tied copy of a copied key. `storage`: torch.save kept both as one
 * storage (proven by the file). `bytes`: the base's config ties the word embeddings and the two
 * are separate tensors (a merge or a consolidation untied them): the build compares their bytes
 * before it writes anything.
 */
export interface TiedAlias {
  readonly name: string;
  readonly sameAs: string;
  readonly proof: "storage" | "bytes";
}

/** The whole conversion, decided before the staging directory exists. */
export interface ConversionPlan {
  readonly shards: readonly OutputShard[];
  readonly tensorCount: number;
  readonly totalBytes: number;
  /** Keys copied unchanged (non-expert tensors, and experts whose layouts already agree). */
  readonly copied: readonly string[];
  readonly instances: readonly RuleInstance[];
  /** Keys whose checkpoint dtype differs from the base's (the output keeps the checkpoint's bits). */
  readonly dtypeChanges: readonly {
    readonly name: string;
    readonly base: DType;
    readonly checkpoint: DType;
  }[];
  /**
   * Checkpoint keys no base key takes that are tied aliases of a copied key (`sameAs`): the output
   * holds their elements under that key, and loaders tie them as the base's config says.
   */
  readonly tiedAliases: readonly TiedAlias[];
}

export interface PlanOptions {
  readonly rules?: readonly ExpertLayoutRule[];
  /** Exact output tensor count required; 0 = no exact count. */
  readonly expectTensors?: number;
  /** Fewest output tensors accepted. */
  readonly minTensors?: number;
  /** The base's config ties the word embeddings: `lm_head.weight` may be a copy of the input embedding. */
  readonly tiedEmbeddings?: boolean;
}

const OUTPUT_EMBEDDING = "lm_head.weight";
const INPUT_EMBEDDING = "embed_tokens.weight";

const sameShape = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);
const showShape = (s: readonly number[]) => `[${s.join(", ")}]`;
const numel = (s: readonly number[]) => s.reduce((a, d) => a * d, 1);

function listKeys(keys: readonly string[], limit = 3): string {
  const shown = keys.slice(0, limit).map((k) => quote(k, 100));
  return keys.length > limit ? `${shown.join(", ")} and ${keys.length - limit} more` : shown.join(", ");
}

/** Tries `rule` at `prefix`; returns the instance or why it does not apply. */
function instantiate(
  rule: CompiledRule,
  prefix: string,
  base: ReadonlyMap<string, LayoutTensor>,
  baseMatches: ReadonlyMap<CompiledGroup, Set<number>>,
  checkpoint: ReadonlyMap<string, SourceTensor>,
  unresolved: ReadonlySet<string>,
  unconsumed: ReadonlySet<string>,
): { instance?: RuleInstance; reason?: string } {
  const why = (text: string) => ({ reason: `rule ${rule.name} at ${quote(prefix)}: ${text}` });
  let experts: number | undefined;
  const dims = new Map<string, PartDims>();
  const baseKeys: string[] = [];
  for (const group of rule.base) {
    let matrix: readonly number[] | undefined;
    if (group.stacked) {
      const key = groupKey(group, prefix);
      const t = base.get(key);
      if (t === undefined || !unresolved.has(key)) return why(`the base has no ${quote(key)}`);
      if (t.shape.length !== 3)
        return why(`base ${quote(key)} is ${showShape(t.shape)}, not [experts, rows, cols]`);
      if (experts !== undefined && experts !== t.shape[0])
        return why(`base ${quote(key)} holds ${t.shape[0]} experts, not ${experts}`);
      experts = t.shape[0]!;
      matrix = t.shape.slice(1);
      baseKeys.push(key);
    } else {
      const found = [...(baseMatches.get(group) ?? [])].sort((a, b) => a - b);
      const count = found.length;
      if (count === 0) return why(`the base has no ${quote(group.key)} keys`);
      if (found[count - 1] !== count - 1)
        return why(`the base's experts of ${quote(group.key)} are not numbered 0..${count - 1}`);
      if (experts !== undefined && experts !== count)
        return why(`the base has ${count} experts of ${quote(group.key)}, not ${experts}`);
      experts = count;
      for (let e = 0; e < count; e++) {
        const key = groupKey(group, prefix, e);
        const t = base.get(key)!;
        if (matrix !== undefined && !sameShape(matrix, t.shape))
          return why(`base ${quote(key)} is ${showShape(t.shape)}, unlike expert 0`);
        matrix = t.shape;
        baseKeys.push(key);
      }
    }
    const partDims = partDimsOf(group, matrix!);
    if (partDims === undefined) {
      return why(
        `base ${quote(groupKey(group, prefix, 0))} is ${showShape(matrix!)}, which ${group.parts.length} parts cannot split`,
      );
    }
    for (const part of group.parts) dims.set(part, partDims);
  }
  const checkpointKeys: string[] = [];
  let dtype: DType | undefined;
  for (const group of rule.checkpoint) {
    const partDims = dims.get(group.parts[0]!)!;
    for (const part of group.parts) {
      const d = dims.get(part)!;
      if (d.out !== partDims.out || d.in !== partDims.in) {
        return why(
          `parts ${group.parts.join(" and ")} have different shapes in the base, so they cannot be fused in ${quote(group.key)}`,
        );
      }
    }
    const matrix = matrixShape(group, partDims);
    const keys = group.stacked
      ? [groupKey(group, prefix)]
      : Array.from({ length: experts! }, (_, e) => groupKey(group, prefix, e));
    const expected = group.stacked ? [experts!, ...matrix] : matrix;
    for (const key of keys) {
      const t = checkpoint.get(key);
      if (t === undefined || !unconsumed.has(key)) return why(`the checkpoint has no ${quote(key)}`);
      if (!sameShape(t.shape, expected)) {
        return why(
          `checkpoint ${quote(key)} is ${showShape(t.shape)}; the base's experts need ${showShape(expected)}`,
        );
      }
      if (dtype !== undefined && t.dtype !== dtype)
        return why(`checkpoint ${quote(key)} is ${t.dtype}, the other experts ${dtype}`);
      dtype = t.dtype;
      checkpointKeys.push(key);
    }
  }
  if (isSubByteDType(dtype!)) {
    // Re-laying experts moves single elements; a packed F4/F6 element has no byte of its own.
    throw refusal(
      "MATERIALIZE_DTYPE_UNSUPPORTED",
      `checkpoint key ${quote(checkpointKeys[0]!)} is ${dtype}, packed below a byte, and rule ${rule.name} re-lays its experts element by element`,
      "the build cannot move a packed element on its own",
      "Save the experts in the base's layout (then they are copied as bytes) or in a dtype of whole bytes.",
      { key: checkpointKeys[0]!, kind: "input" },
    );
  }
  return { instance: { rule, prefix, experts: experts!, dims, dtype: dtype!, checkpointKeys, baseKeys } };
}

/**
 * Decides how every output tensor is produced, with strict key accounting: each base key is
 * produced exactly once, either from the checkpoint tensor of the same key (same shape) or by one
 * rule instance, and each checkpoint key is consumed exactly once. Refuses (naming the key) a base
 * key nothing produces, a checkpoint key nothing consumes, a shape disagreement, and a tensor
 * count that misses `expectTensors` or falls below `minTensors`. Pure.
 */
export function planConversion(
  shards: readonly LayoutShard[],
  source: readonly SourceTensor[],
  options: PlanOptions = {},
): ConversionPlan {
  const rules = (options.rules ?? BUILTIN_EXPERT_RULES).map(compileRule);
  const base = new Map<string, LayoutTensor>();
  for (const shard of shards) for (const t of shard.tensors) base.set(t.name, t);
  const checkpoint = new Map(source.map((t) => [t.name, t]));
  const unresolved = new Set<string>();
  const unconsumed = new Set(checkpoint.keys());
  const copied: string[] = [];
  const reshaped: string[] = [];

  for (const t of base.values()) {
    const s = checkpoint.get(t.name);
    if (s === undefined) {
      unresolved.add(t.name);
      continue;
    }
    if (!sameShape(s.shape, t.shape)) {
      // A layout rule may re-lay it under the same key (transformers 5's fused experts over a
      // stacked base); refused below if none does.
      unresolved.add(t.name);
      reshaped.push(t.name);
      continue;
    }
    if (!isSafetensorsDType(s.dtype)) {
      throw refusal(
        "MATERIALIZE_DTYPE_UNSUPPORTED",
        `checkpoint key ${quote(t.name)} is ${s.dtype}, which safetensors has no name for`,
        "the build keeps the checkpoint's dtype and could not have written it",
        "Cast the tensor to a dtype safetensors holds (for complex128, two float64 tensors or complex64) before saving the checkpoint.",
        { key: t.name, kind: "input" },
      );
    }
    unconsumed.delete(t.name);
    copied.push(t.name);
  }

  // A module path where a stacked key changed shape is re-laid as a whole: its other stacked keys
  // can keep their shape by coincidence (gate_up_proj is [E, H, 2I] and [E, 2I, H] when H = 2I).
  for (const rule of rules) {
    for (const group of rule.base.filter((g) => g.stacked)) {
      for (const name of reshaped) {
        const prefix = group.pattern.exec(name)?.groups?.prefix;
        if (prefix === undefined) continue;
        for (const sibling of rule.base.filter((g) => g.stacked)) {
          const key = groupKey(sibling, prefix);
          if (!copied.includes(key)) continue;
          copied.splice(copied.indexOf(key), 1);
          unresolved.add(key);
          unconsumed.add(key);
        }
      }
    }
  }

  const instances: RuleInstance[] = [];
  const reasons = new Map<string, string>();
  for (const rule of rules) {
    // Group the unresolved base keys this rule's base side matches by module path.
    const byPrefix = new Map<string, Map<CompiledGroup, Set<number>>>();
    for (const key of unresolved) {
      for (const group of rule.base) {
        const match = group.pattern.exec(key);
        if (!match?.groups) continue;
        const prefix = match.groups.prefix!;
        const groups = byPrefix.get(prefix) ?? new Map<CompiledGroup, Set<number>>();
        byPrefix.set(prefix, groups);
        const experts = groups.get(group) ?? new Set<number>();
        groups.set(group, experts);
        if (match.groups.expert !== undefined) experts.add(Number(match.groups.expert));
      }
    }
    for (const [prefix, groups] of [...byPrefix].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const result = instantiate(rule, prefix, base, groups, checkpoint, unresolved, unconsumed);
      if (result.instance) {
        instances.push(result.instance);
        for (const key of result.instance.baseKeys) unresolved.delete(key);
        for (const key of result.instance.checkpointKeys) unconsumed.delete(key);
      } else {
        for (const group of rule.base) {
          for (const e of groups.get(group) ?? [0]) {
            const key = groupKey(group, prefix, e);
            if (!reasons.has(key)) reasons.set(key, result.reason!);
          }
        }
      }
    }
  }

  const mismatch = reshaped.find((name) => unresolved.has(name));
  if (mismatch !== undefined) {
    const reason = reasons.get(mismatch);
    throw refusal(
      "MATERIALIZE_SHAPE_MISMATCH",
      `checkpoint key ${quote(mismatch)} is ${showShape(checkpoint.get(mismatch)!.shape)} but the base's index has it as ${showShape(base.get(mismatch)!.shape)}${reason ? ` (${reason})` : ""}`,
      "the build would write it under that key for loaders that expect the base's shape",
      "Materialize against the base this checkpoint was trained from.",
      { key: mismatch, kind: "input" },
    );
  }
  if (unresolved.size > 0) {
    const missing = [...base.keys()].filter((k) => unresolved.has(k));
    const reason = reasons.get(missing[0]!);
    throw refusal(
      "MATERIALIZE_KEY_MISSING",
      `the base's index lists ${missing.length} key(s) the checkpoint does not provide: ${listKeys(missing)}${reason ? ` (${reason})` : ""}`,
      "the build must produce every key of the base's index, and no checkpoint tensor or expert layout rule produces these",
      "Check that the checkpoint was trained from this base; expert layouts need a matching rule (docs/hf-conversion.md).",
      { key: missing[0], kind: "input" },
    );
  }
  const tiedAliases: TiedAlias[] = [];
  const copiedKeys = new Set(copied);
  for (const t of source) {
    if (!unconsumed.has(t.name)) continue;
    if (t.sameAs !== undefined && copiedKeys.has(t.sameAs)) {
      tiedAliases.push({ name: t.name, sameAs: t.sameAs, proof: "storage" });
      unconsumed.delete(t.name);
      continue;
    }
    if (!options.tiedEmbeddings || !t.name.endsWith(OUTPUT_EMBEDDING)) continue;
    const inputs = copied.filter((name) => {
      const input = checkpoint.get(name)!;
      return name.endsWith(INPUT_EMBEDDING) && input.dtype === t.dtype && sameShape(input.shape, t.shape);
    });
    if (inputs.length === 1) {
      tiedAliases.push({ name: t.name, sameAs: inputs[0]!, proof: "bytes" });
      unconsumed.delete(t.name);
    }
  }
  if (unconsumed.size > 0) {
    const extra = source.map((t) => t.name).filter((k) => unconsumed.has(k));
    throw refusal(
      "MATERIALIZE_KEY_EXTRA",
      `the checkpoint holds ${extra.length} key(s) that land in no key of the base's index: ${listKeys(extra)}`,
      "the build accounts for every checkpoint key, and would have dropped these",
      "Check that the checkpoint was trained from this base.",
      { key: extra[0], kind: "input" },
    );
  }

  const dtypeChanges = copied.flatMap((name) => {
    const [b, c] = [base.get(name)!.dtype, checkpoint.get(name)!.dtype];
    return b === c ? [] : [{ name, base: b, checkpoint: c }];
  });
  const producer = new Map<string, TensorRecipe>();
  for (const name of copied) producer.set(name, { kind: "copy", source: name });
  for (const instance of instances) {
    for (const group of instance.rule.base) {
      if (group.stacked)
        producer.set(groupKey(group, instance.prefix), {
          kind: "experts",
          instance,
          group,
          expert: undefined,
        });
      else
        for (let e = 0; e < instance.experts; e++)
          producer.set(groupKey(group, instance.prefix, e), { kind: "experts", instance, group, expert: e });
    }
  }
  let totalBytes = 0;
  let tensorCount = 0;
  const outShards = shards.map((shard) => ({
    file: shard.file,
    metadata: shard.metadata,
    tensors: shard.tensors.map((t): OutputTensor => {
      const recipe = producer.get(t.name)!;
      const dtype = recipe.kind === "copy" ? checkpoint.get(recipe.source)!.dtype : recipe.instance.dtype;
      // Whole bytes: the shape is the base's, whose header passed the byte-boundary rule.
      const byteLength = packedByteLength(dtype, numel(t.shape))!;
      totalBytes += byteLength;
      tensorCount++;
      return { name: t.name, dtype, shape: t.shape, byteLength, recipe };
    }),
  }));
  const expect = options.expectTensors ?? 0;
  if (expect > 0 && tensorCount !== expect) {
    throw refusal(
      "MATERIALIZE_TENSOR_COUNT",
      `the output would hold ${tensorCount} tensors, not the ${expect} --expect-tensors asks for`,
      "the build would have published an export of another model than expected",
      "Check --base and the checkpoint, or correct --expect-tensors.",
    );
  }
  const min = options.minTensors ?? 0;
  if (tensorCount < min) {
    throw refusal(
      "MATERIALIZE_TENSOR_COUNT",
      `the output would hold ${tensorCount} tensors, fewer than --min-tensors ${min}`,
      "the build would have published an export smaller than a real model's",
      "Check --base and the checkpoint, or lower --min-tensors for a small model.",
    );
  }
  return { shards: outShards, tensorCount, totalBytes, copied, instances, dtypeChanges, tiedAliases };
}
