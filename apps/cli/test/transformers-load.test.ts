// @module-tag torch
// Exports that transformers 5 itself loads: bases written by save_pretrained, train-like
// {"net": state_dict} checkpoints taken from the model's own state_dict() (bf16, HF key names),
// `ckpt merge` then `ckpt materialize-hf`, then AutoModelForCausalLM.from_pretrained,
// AutoTokenizer and GenerationConfig on the export: no key warnings, and logits bit-equal to the
// merged state dict loaded into the model by load_state_dict.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  type ExpertLayout,
  loadWithTransformers,
  makeTransformersFixture,
  materializeHfArgs,
  testdir,
  type TransformersModel,
} from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

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
      const merged = join(root, "run", "checkpoint_artifacts", "iter_000000200", "model.pt");
      const merge = await cli([
        "merge",
        "--mode",
        "avg",
        "--experts",
        `${fixture.expert(0)},${fixture.expert(1)}`,
        "--out",
        merged,
        "--quiet",
      ]);
      expect(merge.code, merge.err).toBe(0);
      const out = join(root, "export");
      const built = await cli(materializeHfArgs(join(merged, ".."), fixture.base, out, "--json"));
      expect(built.code, built.out).toBe(0);
      const notes: string[] = JSON.parse(built.out).notes;
      const applied = notes.filter((n) => n.startsWith("expert layout rule "));
      expect(applied).toEqual(
        rule === undefined ? [] : [`expert layout rule ${rule} re-laid the experts at 2 module path(s)`],
      );

      const index = JSON.parse(await readFile(join(out, "model.safetensors.index.json"), "utf8"));
      expect("lm_head.weight" in index.weight_map).toBe(!fixture.tied);

      const load = await loadWithTransformers(out, merged, layout);
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
