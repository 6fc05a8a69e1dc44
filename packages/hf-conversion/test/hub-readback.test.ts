// @module-tag torch
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { localHubFetch, testdir } from "@ckpt/test-utils";
import { openSafetensors } from "@ckpt/tensors";
import { parseSafetensorsMetadata } from "@huggingface/hub";
import { beforeAll, describe, expect, it } from "vitest";
import { materializeHf } from "../src/index.js";
import { type Fixture, makeArtifact, makeFixture, PYTHON_TIMEOUT } from "./helpers.js";

let root: string;
let moe: Fixture;

beforeAll(async () => {
  root = await testdir("ckpt-hf-hub-");
  moe = await makeFixture(join(root, "moe"), "moe", 1, 41);
}, PYTHON_TIMEOUT);

describe("@huggingface/hub reads a materialized directory", () => {
  it("parses the index and every shard header, agreeing with ckpt's reader and the base's layout", async () => {
    const out = join(root, "teacher");
    const artifact = await makeArtifact(join(root, "art"), moe.expert(0));
    await materializeHf({ source: { kind: "local", ckptDir: artifact }, base: moe.base, out, minTensors: 0 });
    const hub = await parseSafetensorsMetadata({
      repo: "local/teacher",
      path: "model.safetensors.index.json",
      hubUrl: "http://hub.local",
      fetch: localHubFetch(out),
      computeParametersCount: true,
    });
    if (!hub.sharded) throw new Error("expected a sharded directory");
    const base = await parseSafetensorsMetadata({
      repo: "local/base",
      path: "model.safetensors.index.json",
      hubUrl: "http://hub.local",
      fetch: localHubFetch(moe.base),
      computeParametersCount: true,
    });
    if (!base.sharded) throw new Error("expected a sharded base");
    expect(hub.index.weight_map).toEqual(base.index.weight_map);
    expect(hub.parameterCount).toEqual(base.parameterCount);
    expect(Object.keys(hub.headers).sort()).toEqual([
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
    ]);
    for (const [shard, header] of Object.entries(hub.headers)) {
      const source = await openFileByteSource(join(out, shard));
      const ours = await openSafetensors(source);
      expect(header.__metadata__).toEqual({ format: "pt" });
      for (const t of ours.tensors) {
        expect(header[t.name], t.name).toEqual({
          dtype: t.dtype,
          shape: t.shape,
          data_offsets: t.dataOffsets,
        });
        // Same names, dtypes and shapes as the base shard, whatever layout the checkpoint had.
        expect(base.headers[shard]![t.name]).toMatchObject({ dtype: t.dtype, shape: t.shape });
      }
      expect(Object.keys(header).length).toBe(ours.tensors.length + 1);
      await source.close();
    }
  });
});
