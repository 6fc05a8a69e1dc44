import { describe, expect, it } from "vitest";
import {
  BUILTIN_EXPERT_RULES,
  compileRule,
  elementIndex,
  type ExpertLayoutRule,
  type LayoutShard,
  planConversion,
  type SourceTensor,
} from "../src/index.js";

const H = 8;
const I = 4;
const E = 3;

function dense(): { shards: LayoutShard[]; source: SourceTensor[] } {
  const t = (name: string, shape: number[]) => ({ name, dtype: "BF16" as const, shape });
  const shards: LayoutShard[] = [
    {
      file: "model-00001-of-00002.safetensors",
      metadata: { format: "pt" },
      tensors: [t("embed", [16, H]), t("layers.0.q", [H, H])],
    },
    {
      file: "model-00002-of-00002.safetensors",
      metadata: { format: "pt" },
      tensors: [t("norm", [H]), t("lm_head", [16, H])],
    },
  ];
  // The checkpoint lists its tensors in another order: order never matters, keys do.
  const source = [t("lm_head", [16, H]), t("norm", [H]), t("layers.0.q", [H, H]), t("embed", [16, H])];
  return { shards, source };
}

const P = "model.layers.0.mlp.experts";

function perExpertKeys(prefix: string): { name: string; dtype: "BF16"; shape: number[] }[] {
  const out: { name: string; dtype: "BF16"; shape: number[] }[] = [];
  for (let e = 0; e < E; e++) {
    out.push({ name: `${prefix}.${e}.gate_proj.weight`, dtype: "BF16", shape: [I, H] });
    out.push({ name: `${prefix}.${e}.up_proj.weight`, dtype: "BF16", shape: [I, H] });
    out.push({ name: `${prefix}.${e}.down_proj.weight`, dtype: "BF16", shape: [H, I] });
  }
  return out;
}

const stackedKeys = (prefix: string) => [
  { name: `${prefix}.gate_up_proj`, dtype: "BF16" as const, shape: [E, H, 2 * I] },
  { name: `${prefix}.down_proj`, dtype: "BF16" as const, shape: [E, I, H] },
];

// transformers 5's fused expert modules: nn.Linear orientation, stacked.
const fusedKeys = (prefix: string) => [
  { name: `${prefix}.gate_up_proj`, dtype: "BF16" as const, shape: [E, 2 * I, H] },
  { name: `${prefix}.down_proj`, dtype: "BF16" as const, shape: [E, H, I] },
];

const router = { name: "model.layers.0.mlp.gate.weight", dtype: "BF16" as const, shape: [E, H] };

describe("planConversion: dense models need no rules", () => {
  it("copies every key in the base's shard and data order", () => {
    const { shards, source } = dense();
    const plan = planConversion(shards, source);
    expect(plan.shards.map((s) => s.tensors.map((t) => t.name))).toEqual([
      ["embed", "layers.0.q"],
      ["norm", "lm_head"],
    ]);
    expect(plan.copied).toHaveLength(4);
    expect(plan.instances).toHaveLength(0);
    expect(plan.tensorCount).toBe(4);
    expect(plan.totalBytes).toBe((16 * H + H * H + H + 16 * H) * 2);
    expect(plan.shards[0]!.metadata).toEqual({ format: "pt" });
  });

  it("refuses a base key the checkpoint lacks, naming it", () => {
    const { shards, source } = dense();
    const call = () =>
      planConversion(
        shards,
        source.filter((t) => t.name !== "norm"),
      );
    expect(call).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_KEY_MISSING", key: "norm", kind: "input" }),
    );
    expect(call).toThrow(
      /^REFUSED: the base's index lists 1 key\(s\) the checkpoint does not provide: "norm"/,
    );
  });

  it("refuses a checkpoint key no output key takes, naming it", () => {
    const { shards, source } = dense();
    const extra = [...source, { name: "ema.embed", dtype: "BF16" as const, shape: [2] }];
    expect(() => planConversion(shards, extra)).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_KEY_EXTRA", key: "ema.embed" }),
    );
  });

  it("refuses a shape disagreement with the base, naming the key", () => {
    const { shards, source } = dense();
    const wrong = source.map((t) => (t.name === "layers.0.q" ? { ...t, shape: [H, H + 1] } : t));
    expect(() => planConversion(shards, wrong)).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_SHAPE_MISMATCH", key: "layers.0.q" }),
    );
  });

  it("drops a tied lm_head the base's index does not list: one storage, or the config's tie", () => {
    const { shards, source } = dense();
    const tiedBase = shards.map((s) => ({ ...s, tensors: s.tensors.filter((t) => t.name !== "lm_head") }));
    const ckpt = (head: Partial<SourceTensor>) => [
      ...source.filter((t) => t.name !== "lm_head"),
      { name: "model.embed_tokens.weight", dtype: "BF16" as const, shape: [16, H] },
      { name: "lm_head.weight", dtype: "BF16" as const, shape: [16, H], ...head },
    ];
    const base = tiedBase.map((s, i) =>
      i === 0
        ? {
            ...s,
            tensors: [
              ...s.tensors,
              { name: "model.embed_tokens.weight", dtype: "BF16" as const, shape: [16, H] },
            ],
          }
        : s,
    );
    expect(planConversion(base, ckpt({ sameAs: "model.embed_tokens.weight" })).tiedAliases).toEqual([
      { name: "lm_head.weight", sameAs: "model.embed_tokens.weight", proof: "storage" },
    ]);
    expect(planConversion(base, ckpt({}), { tiedEmbeddings: true }).tiedAliases).toEqual([
      { name: "lm_head.weight", sameAs: "model.embed_tokens.weight", proof: "bytes" },
    ]);
    // Untied by the config, or of another shape: an extra key, as before.
    expect(() => planConversion(base, ckpt({}))).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_KEY_EXTRA", key: "lm_head.weight" }),
    );
    expect(() => planConversion(base, ckpt({ shape: [17, H] }), { tiedEmbeddings: true })).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_KEY_EXTRA", key: "lm_head.weight" }),
    );
  });

  it("keeps the checkpoint's dtype and reports where it differs from the base's", () => {
    const { shards, source } = dense();
    const f32 = source.map((t) => (t.name === "norm" ? { ...t, dtype: "F32" as const } : t));
    const plan = planConversion(shards, f32);
    expect(plan.dtypeChanges).toEqual([{ name: "norm", base: "BF16", checkpoint: "F32" }]);
    expect(plan.shards[1]!.tensors[0]).toMatchObject({ name: "norm", dtype: "F32", byteLength: H * 4 });
  });

  it("refuses, naming key and dtype, a checkpoint dtype safetensors cannot hold", () => {
    const { shards, source } = dense();
    const complex = source.map((t) => (t.name === "norm" ? { ...t, dtype: "C128" as const } : t));
    expect(() => planConversion(shards, complex)).toThrow(
      expect.objectContaining({
        code: "MATERIALIZE_DTYPE_UNSUPPORTED",
        key: "norm",
        message: expect.stringContaining('"norm" is C128'),
      }),
    );
  });

  it("copies a packed F4 tensor whole, sized by the byte-boundary rule", () => {
    const { shards, source } = dense();
    const f4 = (t: SourceTensor) => (t.name === "norm" ? { ...t, dtype: "F4" as const } : t);
    const plan = planConversion(
      shards.map((s) => ({ ...s, tensors: s.tensors.map(f4) })),
      source.map(f4),
    );
    expect(plan.shards[1]!.tensors[0]).toMatchObject({ name: "norm", dtype: "F4", byteLength: H / 2 });
  });

  it("checks --expect-tensors exactly and --min-tensors as a floor, before anything is written", () => {
    const { shards, source } = dense();
    expect(() => planConversion(shards, source, { expectTensors: 5 })).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_TENSOR_COUNT" }),
    );
    expect(planConversion(shards, source, { expectTensors: 4 }).tensorCount).toBe(4);
    expect(() => planConversion(shards, source, { minTensors: 800 })).toThrow(/fewer than --min-tensors 800/);
    expect(planConversion(shards, source, { minTensors: 4 }).tensorCount).toBe(4);
  });
});

describe("planConversion: expert layout rules", () => {
  it("stacked fused checkpoint experts become the base's per-expert keys", () => {
    const shards: LayoutShard[] = [
      { file: "a.safetensors", metadata: {}, tensors: [router, ...perExpertKeys(P)] },
    ];
    const plan = planConversion(shards, [router, ...stackedKeys(P)]);
    expect(plan.instances).toHaveLength(1);
    const instance = plan.instances[0]!;
    expect(instance).toMatchObject({ prefix: P, experts: E, dtype: "BF16" });
    expect(instance.rule.name).toBe("stacked-fused-to-per-expert");
    expect(instance.dims.get("gate")).toEqual({ out: I, in: H });
    expect(instance.dims.get("down")).toEqual({ out: H, in: I });
    expect(instance.checkpointKeys).toEqual([`${P}.gate_up_proj`, `${P}.down_proj`]);
    expect(instance.baseKeys).toHaveLength(3 * E);
    const recipes = plan.shards[0]!.tensors.map((t) =>
      t.recipe.kind === "copy" ? "copy" : `${t.recipe.group.key}#${t.recipe.expert}`,
    );
    expect(recipes.slice(0, 4)).toEqual([
      "copy",
      "{prefix}.{expert}.gate_proj.weight#0",
      "{prefix}.{expert}.up_proj.weight#0",
      "{prefix}.{expert}.down_proj.weight#0",
    ]);
  });

  it("per-expert checkpoint keys become the base's stacked fused tensors", () => {
    const shards: LayoutShard[] = [
      { file: "a.safetensors", metadata: {}, tensors: [router, ...stackedKeys(P)] },
    ];
    const plan = planConversion(shards, [router, ...perExpertKeys(P)]);
    expect(plan.instances.map((i) => i.rule.name)).toEqual(["per-expert-to-stacked-fused"]);
    expect(plan.shards[0]!.tensors.map((t) => t.byteLength)).toEqual([
      E * H * 2,
      E * H * 2 * I * 2,
      E * I * H * 2,
    ]);
  });

  it("transformers 5's fused modules ([E, 2I, H], [E, H, I]) become the base's per-expert keys", () => {
    const shards: LayoutShard[] = [
      { file: "a.safetensors", metadata: {}, tensors: [router, ...perExpertKeys(P)] },
    ];
    const plan = planConversion(shards, [router, ...fusedKeys(P)]);
    expect(plan.instances.map((i) => i.rule.name)).toEqual(["transformers-fused-to-per-expert"]);
    expect(plan.instances[0]!.dims.get("up")).toEqual({ out: I, in: H });
    expect(plan.instances[0]!.dims.get("down")).toEqual({ out: H, in: I });
  });

  it("transformers 5's fused modules over a stacked base: same keys, told apart by shape (even gate_up_proj's, equal when H = 2I as here)", () => {
    const shards: LayoutShard[] = [
      { file: "a.safetensors", metadata: {}, tensors: [router, ...stackedKeys(P)] },
    ];
    const plan = planConversion(shards, [router, ...fusedKeys(P)]);
    expect(plan.instances.map((i) => i.rule.name)).toEqual(["transformers-fused-to-stacked-fused"]);
    expect(plan.copied).toEqual([router.name]);
    // The same layout on both sides is copied, not re-laid.
    const same = planConversion(shards, [router, ...stackedKeys(P)]);
    expect(same.instances).toEqual([]);
    expect(same.copied).toHaveLength(3);
  });

  it("refuses a same-key shape disagreement no rule resolves as a shape mismatch, with the rule's reason", () => {
    const shards: LayoutShard[] = [{ file: "a.safetensors", metadata: {}, tensors: stackedKeys(P) }];
    const wrong = [{ ...fusedKeys(P)[0]!, shape: [E, 2 * I, H + 1] }, fusedKeys(P)[1]!];
    expect(() => planConversion(shards, wrong)).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_SHAPE_MISMATCH", key: `${P}.gate_up_proj` }),
    );
  });

  it("applies a rule once per module path (every layer its own instance)", () => {
    const Q = "model.layers.1.mlp.experts";
    const shards: LayoutShard[] = [
      { file: "a.safetensors", metadata: {}, tensors: perExpertKeys(P) },
      { file: "b.safetensors", metadata: {}, tensors: perExpertKeys(Q) },
    ];
    const plan = planConversion(shards, [...stackedKeys(Q), ...stackedKeys(P)]);
    expect(plan.instances.map((i) => i.prefix)).toEqual([P, Q]);
    expect(plan.tensorCount).toBe(6 * E);
  });

  it("a base whose index holds MoE experts still requires the checkpoint's experts", () => {
    const shards: LayoutShard[] = [
      { file: "a.safetensors", metadata: {}, tensors: [router, ...perExpertKeys(P)] },
    ];
    const call = () => planConversion(shards, [router]);
    expect(call).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_KEY_MISSING", key: `${P}.0.gate_proj.weight` }),
    );
    expect(call).toThrow(
      /rule stacked-fused-to-per-expert at "model\.layers\.0\.mlp\.experts": the checkpoint has no/,
    );
  });

  it("refuses checkpoint experts whose stacked shape disagrees with the base's experts", () => {
    const shards: LayoutShard[] = [{ file: "a.safetensors", metadata: {}, tensors: perExpertKeys(P) }];
    const wrong = [{ ...stackedKeys(P)[0]!, shape: [E, H, 2 * I + 2] }, stackedKeys(P)[1]!];
    const call = () => planConversion(shards, wrong);
    expect(call).toThrow(
      /checkpoint "model\.layers\.0\.mlp\.experts\.gate_up_proj" is \[3, 8, 10\]; the base's experts need \[3, 8, 8\]/,
    );
  });

  it("refuses experts a rule would leave unaccounted (a fourth expert the base does not have)", () => {
    const shards: LayoutShard[] = [{ file: "a.safetensors", metadata: {}, tensors: perExpertKeys(P) }];
    const four = stackedKeys(P).map((t) => ({ ...t, shape: [E + 1, ...t.shape.slice(1)] }));
    expect(() => planConversion(shards, four)).toThrow(
      expect.objectContaining({ code: "MATERIALIZE_KEY_MISSING" }),
    );
  });

  it("refuses base experts numbered with a gap", () => {
    const keys = perExpertKeys(P).filter((t) => !t.name.includes(".1."));
    const shards: LayoutShard[] = [{ file: "a.safetensors", metadata: {}, tensors: keys }];
    expect(() => planConversion(shards, stackedKeys(P))).toThrow(/not numbered 0\.\.1/);
  });

  it("refuses experts of mixed dtypes", () => {
    const shards: LayoutShard[] = [{ file: "a.safetensors", metadata: {}, tensors: perExpertKeys(P) }];
    const mixed = [stackedKeys(P)[0]!, { ...stackedKeys(P)[1]!, dtype: "F32" as const }];
    expect(() => planConversion(shards, mixed)).toThrow(/is F32, the other experts BF16/);
  });

  it("refuses, naming key and dtype, experts packed below a byte that a rule would re-lay", () => {
    const shards: LayoutShard[] = [{ file: "a.safetensors", metadata: {}, tensors: perExpertKeys(P) }];
    const packed = stackedKeys(P).map((t) => ({ ...t, dtype: "F4" as const }));
    expect(() => planConversion(shards, packed)).toThrow(
      expect.objectContaining({
        code: "MATERIALIZE_DTYPE_UNSUPPORTED",
        key: `${P}.gate_up_proj`,
        message: expect.stringContaining("is F4, packed below a byte"),
      }),
    );
  });

  it("runs a custom declarative rule (stacked [E, out, in] down projections named w2)", () => {
    const rule: ExpertLayoutRule = {
      name: "w2-stacked",
      checkpoint: [{ key: "{prefix}.w2", stacked: true, parts: ["down"], orientation: "out_in" }],
      base: [
        { key: "{prefix}.{expert}.down.weight", stacked: false, parts: ["down"], orientation: "out_in" },
      ],
    };
    const base = Array.from({ length: E }, (_, e) => ({
      name: `m.${e}.down.weight`,
      dtype: "BF16" as const,
      shape: [H, I],
    }));
    const plan = planConversion(
      [{ file: "a.safetensors", metadata: {}, tensors: base }],
      [{ name: "m.w2", dtype: "BF16", shape: [E, H, I] }],
      {
        rules: [rule],
      },
    );
    expect(plan.instances[0]).toMatchObject({ prefix: "m", experts: E });
  });
});

describe("rules are checked when compiled", () => {
  const group = { key: "{prefix}.x", stacked: true, parts: ["a"], orientation: "out_in" as const };
  it.each([
    ["no {prefix}", { ...group, key: "x" }, /must contain \{prefix\} exactly once/],
    ["{expert} in a stacked key", { ...group, key: "{prefix}.{expert}.x" }, /must not contain \{expert\}/],
    ["no {expert} in a per-expert key", { ...group, stacked: false }, /must contain \{expert\} exactly once/],
    ["repeated parts", { ...group, parts: ["a", "a"] }, /distinct parts/],
    ["an unknown orientation", { ...group, orientation: "rows" as never }, /use out_in or in_out/],
  ])("%s", (_label, bad, message) => {
    expect(() => compileRule({ name: "r", checkpoint: [group], base: [bad] })).toThrow(message);
  });

  it("both sides must hold the same parts", () => {
    const other = { ...group, key: "{prefix}.y", parts: ["b"] };
    expect(() => compileRule({ name: "r", checkpoint: [group], base: [other] })).toThrow(
      /hold different parts/,
    );
  });

  it("the built-in rules compile", () => {
    expect(BUILTIN_EXPERT_RULES.map((r) => [r.name, compileRule(r).parts])).toEqual([
      ["stacked-fused-to-per-expert", ["gate", "up", "down"]],
      ["per-expert-to-stacked-fused", ["gate", "up", "down"]],
      ["transformers-fused-to-per-expert", ["gate", "up", "down"]],
      ["transformers-fused-to-stacked-fused", ["gate", "up", "down"]],
    ]);
  });
});

describe("elementIndex: the layout definition the converter and the verifier are measured against", () => {
  const dims = { out: 2, in: 3 };
  it("out_in stacks fused parts as row blocks", () => {
    const g = { key: "", stacked: true, parts: ["gate", "up"], orientation: "out_in" as const };
    expect(elementIndex(g, dims, 0, 0, 0)).toBe(0);
    expect(elementIndex(g, dims, 0, 1, 2)).toBe(5);
    expect(elementIndex(g, dims, 1, 0, 0)).toBe(6);
  });
  it("in_out keeps parts as column blocks of the transpose", () => {
    const g = { key: "", stacked: true, parts: ["gate", "up"], orientation: "in_out" as const };
    expect(elementIndex(g, dims, 0, 1, 0)).toBe(1);
    expect(elementIndex(g, dims, 1, 0, 0)).toBe(2);
    expect(elementIndex(g, dims, 1, 1, 2)).toBe(2 * 4 + 3);
  });
});
