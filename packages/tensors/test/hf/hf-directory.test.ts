import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  checkShardName,
  openHfDirectory,
  parseSafetensorsIndex,
  planSafetensors,
  type TensorDescription,
  writeShardedSafetensors,
} from "../../src/index.js";

const tensors: TensorDescription[] = [
  { name: "a", dtype: "F32", shape: [4] },
  { name: "b", dtype: "BF16", shape: [2, 4] },
  { name: "c", dtype: "U8", shape: [3] },
];
const zeros = (t: { byteLength: number }) => new Uint8Array(t.byteLength);

async function shardedDir(): Promise<string> {
  const dir = await testdir();
  await writeShardedSafetensors(dir, tensors, zeros, { maxShardBytes: 19 });
  return dir;
}

async function writeIndex(dir: string, index: unknown): Promise<void> {
  await writeFile(
    join(dir, "model.safetensors.index.json"),
    typeof index === "string" ? index : JSON.stringify(index),
  );
}

async function writeSingle(path: string, descriptions: TensorDescription[]): Promise<void> {
  const plan = planSafetensors(descriptions);
  const bytes = new Uint8Array(plan.fileSize);
  bytes.set(plan.headerBytes);
  await writeFile(path, bytes);
}

describe("Hugging Face directories", () => {
  it("opens a sharded directory: index keys equal the shards' tensors", async () => {
    const dir = await shardedDir();
    const hf = await openHfDirectory(dir);
    expect(hf.indexFile).toBe("model.safetensors.index.json");
    expect(hf.files.map((f) => f.file)).toEqual([
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
    ]);
    expect(hf.tensors.map((t) => [t.name, t.file])).toEqual([
      ["a", "model-00001-of-00002.safetensors"],
      ["b", "model-00002-of-00002.safetensors"],
      ["c", "model-00002-of-00002.safetensors"],
    ]);
    await hf.close();
  });

  it("opens a single model.safetensors without an index", async () => {
    const dir = await testdir();
    await writeSingle(join(dir, "model.safetensors"), tensors);
    const hf = await openHfDirectory(dir);
    expect(hf.indexFile).toBeUndefined();
    expect(hf.tensors.map((t) => t.name)).toEqual(["a", "b", "c"]);
    await hf.close();
  });

  it("refuses a directory with no weights", async () => {
    await expect(openHfDirectory(await testdir())).rejects.toMatchObject({ code: "HF_NO_WEIGHTS" });
  });

  it("refuses an index that names a tensor its shard lacks, or a shard holding an unlisted tensor", async () => {
    const dir = await shardedDir();
    const weightMap = {
      a: "model-00001-of-00002.safetensors",
      b: "model-00002-of-00002.safetensors",
      c: "model-00002-of-00002.safetensors",
    };
    await writeIndex(dir, { weight_map: { ...weightMap, ghost: "model-00001-of-00002.safetensors" } });
    await expect(openHfDirectory(dir)).rejects.toMatchObject({
      code: "HF_INDEX_TENSOR_MISMATCH",
      tensor: "ghost",
    });
    const { c: _c, ...withoutC } = weightMap;
    await writeIndex(dir, { weight_map: withoutC });
    await expect(openHfDirectory(dir)).rejects.toMatchObject({
      code: "HF_INDEX_TENSOR_MISMATCH",
      tensor: "c",
    });
    await writeIndex(dir, { weight_map: { ...weightMap, c: "model-00001-of-00002.safetensors" } });
    await expect(openHfDirectory(dir)).rejects.toMatchObject({
      code: "HF_INDEX_TENSOR_MISMATCH",
      tensor: "c",
    });
  });

  it("refuses a missing shard, and a corrupt shard with the safetensors error", async () => {
    const dir = await shardedDir();
    await writeFile(join(dir, "model-00002-of-00002.safetensors"), new Uint8Array(5));
    await expect(openHfDirectory(dir)).rejects.toMatchObject({ code: "SAFETENSORS_FILE_TOO_SMALL" });
    await rm(join(dir, "model-00002-of-00002.safetensors"));
    await expect(openHfDirectory(dir)).rejects.toMatchObject({ code: "HF_SHARD_MISSING" });
  });

  it.each([
    ["duplicate keys", '{"weight_map":{"a":"x.safetensors","a":"y.safetensors"}}', "HF_INDEX_DUPLICATE_KEY"],
    ["not JSON", "{weight_map}", "HF_INDEX_NOT_JSON"],
    ["an array", "[]", "HF_INDEX_INVALID"],
    ["no weight_map", "{}", "HF_INDEX_INVALID"],
    ["an empty weight_map", '{"weight_map":{}}', "HF_INDEX_INVALID"],
    ["a non-string shard", '{"weight_map":{"a":3}}', "HF_INDEX_INVALID"],
    ["a non-object metadata", '{"metadata":3,"weight_map":{"a":"x.safetensors"}}', "HF_INDEX_INVALID"],
    ["a parent-directory shard", '{"weight_map":{"a":"../x.safetensors"}}', "HF_INDEX_UNSAFE_SHARD_NAME"],
    ["an absolute shard", '{"weight_map":{"a":"/etc/passwd"}}', "HF_INDEX_UNSAFE_SHARD_NAME"],
    [
      "a URL shard",
      '{"weight_map":{"a":"https://evil.example/x.safetensors"}}',
      "HF_INDEX_UNSAFE_SHARD_NAME",
    ],
  ])("refuses an index with %s", async (_what, text, code) => {
    expect(() => parseSafetensorsIndex(text, { file: "model.safetensors.index.json" })).toThrow(
      expect.objectContaining({ code }),
    );
    const dir = await testdir();
    await writeIndex(dir, text);
    await expect(openHfDirectory(dir)).rejects.toMatchObject({ code });
  });

  it.each([
    "a/../b.safetensors",
    "a\\b.safetensors",
    "C:x.safetensors",
    "x\u0000.safetensors",
    "",
    "./x",
    "a//b",
  ])("refuses the shard name %j", (name) => {
    expect(() => checkShardName(name, "index.json")).toThrow(
      expect.objectContaining({ code: "HF_INDEX_UNSAFE_SHARD_NAME" }),
    );
  });

  it("reads six-digit shard totals, as Hugging Face names shards past 99,999 ({:05d})", async () => {
    const dir = await testdir();
    const names = ["model-00001-of-100000.safetensors", "model-100000-of-100000.safetensors"];
    await writeSingle(join(dir, names[0]!), [tensors[0]!]);
    await writeSingle(join(dir, names[1]!), [tensors[2]!]);
    await writeIndex(dir, { metadata: { total_size: 19 }, weight_map: { a: names[0], c: names[1] } });
    const hf = await openHfDirectory(dir);
    expect(hf.files.map((f) => f.file).sort()).toEqual(names);
    expect(Array.from(await hf.readTensor("c"))).toEqual([0, 0, 0]);
    await hf.close();
  });

  it("accepts shards in a subdirectory", async () => {
    const dir = await testdir();
    await mkdir(join(dir, "weights"));
    await writeSingle(join(dir, "weights", "part.safetensors"), tensors.slice(0, 1));
    await writeIndex(dir, { metadata: { total_size: 16 }, weight_map: { a: "weights/part.safetensors" } });
    const hf = await openHfDirectory(dir);
    expect(hf.tensors.map((t) => t.file)).toEqual(["weights/part.safetensors"]);
    expect(Array.from(await hf.readTensor("a"))).toEqual(Array(16).fill(0));
    await hf.close();
  });
});
