import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { torch2Python } from "./python.js";

/** tools/fixtures/transformers_models.py: tiny models built by transformers, and transformers as a loader judge. */
export const TRANSFORMERS_MODELS = join(
  import.meta.dirname,
  "..",
  "..",
  "fixtures",
  "transformers_models.py",
);

/** Model families the script builds (AutoConfig.for_model names); idefics3 is a VLM with a processor. */
export type TransformersModel = "llama" | "qwen3" | "qwen3_moe" | "idefics3";
/** How a checkpoint holds a MoE model's routed experts (see the script's docstring). */
export type ExpertLayout = "fused" | "per_expert" | "stacked";

export interface TransformersFixture {
  /** The save_pretrained base directory. */
  readonly base: string;
  readonly baseShards: number;
  readonly tied: boolean;
  /** Keys of each expert's state dict. */
  readonly keys: readonly string[];
  /** `experts/expert_<i>/model.pt`. */
  expert(i: number): string;
}

/** What transformers made of an export (the script's `load` command). */
export interface TransformersLoad {
  /** The class config.json's architectures names, as loaded. */
  class: string;
  /** AutoProcessor's class, when the export has a processor config. */
  processor: string | null;
  /** A VLM's image processor class, as AutoProcessor loaded it. */
  image_processor?: string;
  /** How many image tokens the processor put in the prompt for the one image. */
  image_tokens?: number;
  /** A VLM's logits on the text after an image, bit-equal to the state dict's. */
  image_logits_equal?: boolean;
  /** Another image gives other logits: the vision tower took part. */
  image_changes_logits?: boolean;
  loading_info: Record<string, string[]>;
  key_warnings: string[];
  warnings: string[];
  tokens: number;
  logits_equal: boolean;
  logits_max_abs_diff: number;
  logits_dtype: string;
  tied: boolean;
  generation: { eos_token_id: number; max_new_tokens: number };
}

const run = async (args: string[]) =>
  (
    await promisify(execFile)(torch2Python(), [TRANSFORMERS_MODELS, ...args], {
      maxBuffer: 16 * 1024 * 1024,
      env: { ...process.env, HF_HUB_OFFLINE: "1", PYTHONDONTWRITEBYTECODE: "1" },
    })
  ).stdout;

/** Builds a base with save_pretrained and `experts` train-like bf16 checkpoints in `layout`. */
export async function makeTransformersFixture(
  dir: string,
  model: TransformersModel,
  layout: ExpertLayout,
  experts: number,
  seed: number,
): Promise<TransformersFixture> {
  const args = ["--out", dir, "--model", model, "--layout", layout, "--experts", String(experts)];
  const made = JSON.parse(await run(["build", ...args, "--seed", String(seed)])) as {
    base_shards: number;
    tied: boolean;
    keys: string[];
  };
  return {
    base: join(dir, "base"),
    baseShards: made.base_shards,
    tied: made.tied,
    keys: made.keys,
    expert: (i) => join(dir, "experts", `expert_${i}`, "model.pt"),
  };
}

/** Loads `exportDir` with transformers and compares its logits with `modelPt` (held in `layout`) loaded directly. */
export async function loadWithTransformers(
  exportDir: string,
  modelPt: string,
  layout: ExpertLayout,
): Promise<TransformersLoad> {
  return JSON.parse(await run(["load", exportDir, modelPt, layout])) as TransformersLoad;
}
