// @module-tag torch
// The reference safetensors library (0.8, torch 2.13) reads every shard materialize-hf writes:
// safe_open with torch and numpy, load_file and the Rust core's deserialize, tensors bit-equal to
// ckpt's own reading, metadata as the base has it.
import { createHash } from "node:crypto";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { type ReferenceReading, referenceSafetensors, testdir } from "@ckpt/test-utils";
import { openSafetensors } from "@ckpt/tensors";
import { beforeAll, describe, expect, it } from "vitest";
import { materializeHf } from "../src/index.js";
import { type Fixture, makeArtifact, makeFixture, PYTHON_TIMEOUT, request } from "./helpers.js";

let root: string;
let moe: Fixture;

beforeAll(async () => {
  root = await testdir("ckpt-hf-reference-");
  moe = await makeFixture(join(root, "moe"), "moe", 1, 43);
}, PYTHON_TIMEOUT);

describe("safetensors 0.8 reads a materialized directory", () => {
  it("every shard opens four ways, bit-equal to ckpt's reading, metadata intact", {
    timeout: PYTHON_TIMEOUT,
  }, async () => {
    const out = join(root, "teacher");
    const artifact = await makeArtifact(join(root, "art"), moe.expert(0));
    await materializeHf(request(artifact, moe.base, out));
    const shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"].map((f) =>
      join(out, f),
    );
    const readings = await referenceSafetensors<Record<string, Record<string, ReferenceReading>>>(
      "read",
      ...shards,
    );
    let tensors = 0;
    for (const shard of shards) {
      const reading = readings[shard]!;
      const source = await openFileByteSource(shard);
      try {
        const ours = await openSafetensors(source);
        expect(reading.safe_open_pt!.metadata).toEqual(ours.metadata);
        expect(reading.safe_open_numpy!.metadata).toEqual({ format: "pt" });
        expect(Object.keys(reading.load_file!.tensors!).sort()).toEqual(
          ours.tensors.map((t) => t.name).sort(),
        );
        for (const t of ours.tensors) {
          const want = {
            dtype: t.dtype,
            shape: t.shape,
            sha256: createHash("sha256")
              .update(await ours.readTensor(t.name))
              .digest("hex"),
          };
          expect(reading.deserialize!.tensors![t.name], t.name).toEqual(want);
          expect(reading.safe_open_pt!.tensors![t.name], t.name).toEqual(want);
          expect(reading.load_file!.tensors![t.name], t.name).toEqual(want);
          // numpy has no bfloat16: the reference refuses the conversion by name, not the file.
          expect(reading.safe_open_numpy!.tensors![t.name]!.error, t.name).toMatch(/bfloat16/);
          tensors++;
        }
      } finally {
        await source.close();
      }
    }
    expect(tensors).toBeGreaterThan(10);
  });
});
