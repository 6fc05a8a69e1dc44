// @module-tag torch
// Exports that transformers 5 itself loads: bases written by save_pretrained, train-like
// {"net": state_dict} checkpoints taken from the model's own state_dict() (bf16, HF key names),
// `ckpt merge` then `ckpt materialize-hf`, then AutoModelForCausalLM.from_pretrained,
// AutoTokenizer and GenerationConfig on the export: no key warnings, and logits bit-equal to the
// merged state dict loaded into the model by load_state_dict.
import { access, cp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { MATERIALIZED_MARKER } from "@ckpt/manifest";
import {
  type ExpertLayout,
  loadWithTransformers,
  makeTransformersFixture,
  materializeHfArgs,
  testdir,
  torch2Python,
  type TransformersFixture,
  type TransformersModel,
} from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";
import { treeDigest } from "./helpers/tree.js";

const TIMEOUT_MS = 300_000;

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const c = captureIo();
  const code = await runCli(args, c.io);
  return { code, out: c.out(), err: c.err() };
}

describe("transformers loads what ckpt merge and ckpt materialize-hf build", () => {
  it.each([
    ["llama", "fused", undefined],
    ["qwen3", "fused", undefined],
    ["qwen3_moe", "fused", "transformers-fused-to-per-expert"],
    ["qwen3_moe", "per_expert", undefined],
    ["qwen3_moe", "stacked", "stacked-fused-to-per-expert"],
  ] as const satisfies readonly (readonly [TransformersModel, ExpertLayout, string | undefined])[])(
    "%s, experts held %s",
    { timeout: TIMEOUT_MS },
    async (model, layout, rule) => {
      const root = await testdir("ckpt-cli-transformers-");
      const fixture = await makeTransformersFixture(join(root, "fx"), model, layout, 2, 17);
      expect(fixture.baseShards).toBeGreaterThanOrEqual(2);
      const mergedModel = await merged(root, fixture);
      const out = join(root, "export");
      const built = await cli(materializeHfArgs(join(mergedModel, ".."), fixture.base, out, "--json"));
      expect(built.code, built.out).toBe(0);
      const notes: string[] = JSON.parse(built.out).notes;
      const applied = notes.filter((n) => n.startsWith("expert layout rule "));
      expect(applied).toEqual(
        rule === undefined ? [] : [`expert layout rule ${rule} re-laid the experts at 2 module path(s)`],
      );

      const index = JSON.parse(await readFile(join(out, "model.safetensors.index.json"), "utf8"));
      expect("lm_head.weight" in index.weight_map).toBe(!fixture.tied);

      const load = await loadWithTransformers(out, mergedModel, layout);
      expect(load.loading_info).toEqual({
        missing_keys: [],
        unexpected_keys: [],
        mismatched_keys: [],
        error_msgs: [],
      });
      expect(load.key_warnings).toEqual([]);
      expect(load.logits_dtype).toBe("torch.bfloat16");
      expect(load.logits_max_abs_diff).toBe(0);
      expect(load.logits_equal).toBe(true);
      expect(load.tokens).toBeGreaterThan(3);
      expect(load.tied).toBe(fixture.tied);
      expect(load.generation).toEqual({ eos_token_id: 2, max_new_tokens: 8 });
    },
  );
});

/** `ckpt merge --mode avg` of the fixture's two experts into a run's artifact; returns its model.pt. */
async function merged(root: string, fixture: TransformersFixture): Promise<string> {
  const model = join(root, "run", "checkpoint_artifacts", "iter_000000200", "model.pt");
  const merge = await cli([
    "merge",
    "--mode",
    "avg",
    "--experts",
    `${fixture.expert(0)},${fixture.expert(1)}`,
    "--out",
    model,
    "--quiet",
  ]);
  expect(merge.code, merge.err).toBe(0);
  return model;
}

describe("a VLM (Idefics3 layout: vision tower, connector, Llama text model) with its processor", () => {
  it("loads with its class, AutoTokenizer, AutoProcessor and GenerationConfig; text and image logits bit-equal", {
    timeout: TIMEOUT_MS,
  }, async () => {
    const root = await testdir("ckpt-cli-transformers-vlm-");
    const fixture = await makeTransformersFixture(join(root, "fx"), "idefics3", "fused", 2, 23);
    expect(fixture.baseShards).toBeGreaterThanOrEqual(2);
    expect(fixture.keys.some((k) => k.startsWith("model.vision_model."))).toBe(true);
    expect(fixture.keys.some((k) => k.startsWith("model.connector."))).toBe(true);
    const model = await merged(root, fixture);
    const out = join(root, "export");
    const built = await cli(materializeHfArgs(join(model, ".."), fixture.base, out, "--json"));
    expect(built.code, built.out).toBe(0);
    // The processor's files are sidecars: carried over byte for byte by the rule that copies them.
    for (const file of [
      "processor_config.json",
      "chat_template.jinja",
      "tokenizer.json",
      "tokenizer_config.json",
      "generation_config.json",
    ]) {
      expect(await readFile(join(out, file), "utf8"), file).toBe(
        await readFile(join(fixture.base, file), "utf8"),
      );
    }
    const load = await loadWithTransformers(out, model, "fused");
    expect(load.class).toBe("Idefics3ForConditionalGeneration");
    expect(load.processor).toBe("Idefics3Processor");
    // The PIL image processor: the export loads without torchvision.
    expect(load.image_processor).toBe("Idefics3ImageProcessorPil");
    expect(load.image_tokens).toBe(4);
    expect(load.loading_info).toEqual({
      missing_keys: [],
      unexpected_keys: [],
      mismatched_keys: [],
      error_msgs: [],
    });
    expect(load.key_warnings).toEqual([]);
    expect(load.logits_dtype).toBe("torch.bfloat16");
    expect(load.logits_max_abs_diff).toBe(0);
    expect(load.logits_equal).toBe(true);
    expect(load.image_logits_equal).toBe(true);
    expect(load.image_changes_logits).toBe(true);
    expect(load.tied).toBe(false);
    expect(load.generation).toEqual({ eos_token_id: 2, max_new_tokens: 8 });
  });
});

describe("materialize-hf --loader-check", () => {
  it("records the loader's verdict in the marker when the staged build of a VLM loads", {
    timeout: TIMEOUT_MS,
  }, async () => {
    const root = await testdir("ckpt-cli-loader-check-");
    const fixture = await makeTransformersFixture(join(root, "fx"), "idefics3", "fused", 2, 29);
    const model = await merged(root, fixture);
    const out = join(root, "export");
    const args = materializeHfArgs(join(model, ".."), fixture.base, out, "--loader-check", torch2Python());
    const built = await cli([...args, "--json"]);
    expect(built.code, built.out).toBe(0);
    const report = JSON.parse(built.out);
    const record = {
      verdict: "passed",
      python: torch2Python(),
      transformers_version: expect.stringMatching(/^5\./),
      calls: [
        "AutoConfig",
        "Idefics3ForConditionalGeneration",
        "AutoTokenizer",
        "AutoProcessor",
        "GenerationConfig",
      ],
    };
    expect(report.loader_check).toEqual({ ...record, seconds: expect.any(Number) });
    const marker = await MATERIALIZED_MARKER.read(join(out, MATERIALIZED_MARKER.fileName));
    expect(marker.loader_check).toEqual(record);
    const human = await cli(args);
    expect(human.err).toMatch(/^skipped /);
    expect(human.err).toContain("note: --loader-check ran no loader");
  });

  it.each([
    [
      "a broken tokenizer.json",
      async (base: string) =>
        writeFile(join(base, "tokenizer.json"), '{"version": "1.0", "model": {"type": "Nothing"}}\n'),
      /AutoTokenizer: /,
    ],
    [
      "a config.json naming an architecture the weights do not fit",
      async (base: string) => {
        const config = JSON.parse(await readFile(join(base, "config.json"), "utf8"));
        await writeFile(
          join(base, "config.json"),
          `${JSON.stringify({ ...config, architectures: ["Qwen3ForCausalLM"] })}\n`,
        );
      },
      /Qwen3ForCausalLM: /,
    ],
  ] as const)(
    "refuses %s with the loader's message; the staged build is removed, the previous export byte-identical",
    { timeout: TIMEOUT_MS },
    async (_what, damage, message) => {
      const root = await testdir("ckpt-cli-loader-check-");
      const fixture = await makeTransformersFixture(join(root, "fx"), "llama", "fused", 2, 31);
      const model = await merged(root, fixture);
      const out = join(root, "export");
      expect((await cli(materializeHfArgs(join(model, ".."), fixture.base, out, "--quiet"))).code).toBe(0);
      const broken = join(root, "broken-base");
      await cp(fixture.base, broken, { recursive: true });
      await damage(broken);
      const before = await treeDigest(root);
      const refused = await cli([
        ...materializeHfArgs(join(model, ".."), broken, out, "--force", "--loader-check", torch2Python()),
        "--json",
      ]);
      expect(refused.code, refused.out).toBe(1);
      const error = JSON.parse(refused.out).error;
      expect(error.code).toBe("MATERIALIZE_LOADER_CHECK_FAILED");
      expect(error.message).toMatch(
        new RegExp(`^materialize ${out}: the loader check \\(.*\\) refused the staged build ${out}\\.tmp: `),
      );
      expect(error.message).toMatch(message);
      expect(error.message).toContain("Nothing was published: the staged build was removed");
      await expect(access(`${out}.tmp`)).rejects.toThrow();
      expect(await treeDigest(root)).toBe(before);
    },
  );
});
