// A tiny Hugging Face base directory for the demo's merge (task vectors are taken against it) and
// materialization (its index lays out the output): the demo model's initial weights in bf16 as
// sharded safetensors with an index, plus config and tokenizer sidecars. Written with
// @ckpt/tensors, so no Python is needed.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { HIDDEN_DIM, INPUT_DIM, LAYERS, OUTPUT_DIM, PARAM_SPECS, type Params } from "./model.js";

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** A word-level tokenizer small enough to read: the sidecar a loader expects, not a trained one. */
function tokenizerJson() {
  const vocab: Record<string, number> = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  for (const word of ["the", "checkpoint", "is", "proven", "at", "every", "step"]) {
    vocab[word] = Object.keys(vocab).length;
  }
  return {
    version: "1.0",
    added_tokens: [
      {
        id: 1,
        content: "<s>",
        special: true,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
      },
      {
        id: 2,
        content: "</s>",
        special: true,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
      },
    ],
    normalizer: null,
    pre_tokenizer: { type: "Whitespace" },
    post_processor: null,
    decoder: null,
    model: { type: "WordLevel", vocab, unk_token: "<unk>" },
  };
}

export interface HfBase {
  readonly dir: string;
  readonly files: readonly string[];
  readonly bytes: number;
}

/** Writes the base into `dir` (which must not exist yet or be empty). */
export async function writeHfBase(dir: string, params: Params): Promise<HfBase> {
  const { f32ToBf16Bytes, writeShardedSafetensors } = await import("@ckpt/tensors");
  await mkdir(dir, { recursive: true });
  const tensors = PARAM_SPECS.map((s) => ({ name: s.name, dtype: "BF16" as const, shape: [...s.shape] }));
  const total = PARAM_SPECS.reduce((sum, s) => sum + s.shape[0] * s.shape[1] * 2, 0);
  const written = await writeShardedSafetensors(
    dir,
    tensors,
    (tensor) => {
      const values = params.get(tensor.name)!;
      const out = new Uint8Array(values.length * 2);
      f32ToBf16Bytes(values, out);
      return out;
    },
    // Two shards, so the index and the shard layout are exercised.
    { maxShardBytes: Math.ceil(total / 2) + 1 },
  );
  const sidecars: Record<string, unknown> = {
    "config.json": {
      architectures: ["CkptDemoMlp"],
      model_type: "ckpt-demo-mlp",
      hidden_size: INPUT_DIM,
      intermediate_size: HIDDEN_DIM,
      num_hidden_layers: LAYERS,
      vocab_size: OUTPUT_DIM,
      torch_dtype: "bfloat16",
    },
    "generation_config.json": { bos_token_id: 1, eos_token_id: 2 },
    "tokenizer.json": tokenizerJson(),
    "tokenizer_config.json": {
      tokenizer_class: "PreTrainedTokenizerFast",
      bos_token: "<s>",
      eos_token: "</s>",
      unk_token: "<unk>",
      model_max_length: 64,
    },
    "special_tokens_map.json": { bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>" },
  };
  let bytes = written.indexFile.size + written.shards.reduce((s, f) => s + f.size, 0);
  for (const [name, value] of Object.entries(sidecars)) {
    const text = json(value);
    await writeFile(join(dir, name), text);
    bytes += Buffer.byteLength(text);
  }
  return {
    dir,
    files: [...Object.keys(sidecars), ...written.shards.map((s) => s.path), written.indexFile.path].sort(),
    bytes,
  };
}
