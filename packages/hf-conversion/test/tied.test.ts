// A checkpoint's lm_head.weight over a base that ties the word embeddings and does not list it:
// dropped when its bytes are the input embedding's, refused by name when they are not.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { f32ToBf16Bytes, writeShardedSafetensors, writeTorchFile } from "@ckpt/tensors";
import { makeModelArtifact, testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { materializeHf } from "../src/index.js";
import { request } from "./helpers.js";

const SHAPES: Record<string, number[]> = { "model.embed_tokens.weight": [32, 8], "model.norm.weight": [8] };
const bf16 = (n: number, value: (i: number) => number) => {
  const out = new Uint8Array(n * 2);
  f32ToBf16Bytes(
    Float32Array.from({ length: n }, (_, i) => value(i)),
    out,
  );
  return out;
};
const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

let root = "";
let base = "";

beforeAll(async () => {
  root = await testdir("ckpt-hf-tied-");
  base = join(root, "base");
  const tensors = Object.entries(SHAPES).map(([name, shape]) => ({ name, dtype: "BF16" as const, shape }));
  await writeShardedSafetensors(base, tensors, (t) => bf16(numel(t.shape), () => 0.5), {
    maxShardBytes: 256,
  });
  await writeFile(
    join(base, "config.json"),
    JSON.stringify({ model_type: "qwen3", tie_word_embeddings: true }),
  );
});

/** A consolidated artifact whose lm_head.weight is the embedding plus `offset` (a separate tensor). */
async function artifact(name: string, offset: number): Promise<string> {
  const shapes = { ...SHAPES, "lm_head.weight": SHAPES["model.embed_tokens.weight"]! };
  const path = join(root, name, "model.pt");
  await mkdir(join(root, name), { recursive: true });
  await writeTorchFile(path, {
    tree: {
      net: Object.fromEntries(Object.entries(shapes).map(([k, shape]) => [k, { dtype: "BF16", shape }])),
    },
    provideTensor: (key, desc) =>
      bf16(numel([...desc.shape]), (i) => (i % 7) * 0.25 + (key.endsWith("lm_head.weight") ? offset : 0)),
  });
  return makeModelArtifact(join(root, name, "art"), path);
}

describe("tied word embeddings the base does not list", () => {
  it("drops an lm_head.weight equal to the input embedding, with a note", async () => {
    const report = await materializeHf(request(await artifact("same", 0), base, join(root, "out-same")));
    expect(report.marker.tensor_count).toBe(2);
    expect(report.notes.join("\n")).toMatch(
      /lm_head\.weight is tied to model\.embed_tokens\.weight \(equal bytes, config\.json ties the word embeddings\)/,
    );
  });

  it("refuses, naming the key, an lm_head.weight that differs from the input embedding", async () => {
    const out = join(root, "out-differs");
    await expect(materializeHf(request(await artifact("differs", 1), base, out))).rejects.toThrow(
      /checkpoint key "lm_head\.weight" differs from "model\.embed_tokens\.weight"/,
    );
  });
});
