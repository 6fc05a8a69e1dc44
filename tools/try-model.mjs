#!/usr/bin/env node
// Writes a small consolidated checkpoint `torch.save({"net": state_dict})` in bf16 with Hugging
// Face key names, using the built @ckpt/tensors (no Python). Used by tools/try.sh.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { f32ToBf16Bytes, writeTorchFile } from "../packages/tensors/dist/index.js";

const out = process.argv[2];
if (!out) {
  console.error("usage: node tools/try-model.mjs <path/to/model.pt>");
  process.exit(2);
}
const layers = 2;
const hidden = 64;
const net = {};
for (let i = 0; i < layers; i++) {
  for (const [name, shape] of [
    ["self_attn.q_proj.weight", [hidden, hidden]],
    ["mlp.up_proj.weight", [4 * hidden, hidden]],
    ["input_layernorm.weight", [hidden]],
  ]) {
    net[`model.layers.${i}.${name}`] = { dtype: "BF16", shape };
  }
}
let seed = 42;
/** A small linear congruential generator: the same model on every run. */
function random() {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return (seed / 2 ** 32 - 0.5) * 0.1;
}
mkdirSync(dirname(out), { recursive: true });
const written = await writeTorchFile(out, {
  tree: { net },
  provideTensor(_name, desc) {
    const values = Float32Array.from({ length: desc.shape.reduce((a, b) => a * b, 1) }, random);
    const bytes = new Uint8Array(values.length * 2);
    f32ToBf16Bytes(values, bytes);
    return bytes;
  },
});
console.log(`wrote ${written.path} (${written.bytes} bytes, ${written.tensors} tensors)`);
