// @module-tag torch
import { testdir } from "@ckpt/test-utils";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { openSafetensors } from "@ckpt/tensors";
import { beforeAll, describe, expect, it } from "vitest";
import { sourceBytes } from "../src/convert/write.js";
import { materializeHf } from "../src/index.js";
import type { OutputShard } from "../src/plan/mapping.js";
import { type OpenedSource, openSource } from "../src/source/open.js";
import { probeShard } from "../src/verify/verify.js";
import { type Fixture, makeArtifact, makeFixture, PYTHON_TIMEOUT } from "./helpers.js";

const SHARD = "model-00001-of-00002.safetensors";

let root: string;
let fixture: Fixture;
let artifact: string;

beforeAll(async () => {
  root = await testdir("ckpt-hf-probe-");
  fixture = await makeFixture(join(root, "dense"), "dense", 1, 31);
  artifact = await makeArtifact(join(root, "art"), fixture.expert(0));
}, PYTHON_TIMEOUT);

/** A fresh output, its first shard as a plan of plain copies (a dense model's keys map to themselves). */
async function builtShard(name: string): Promise<{ out: string; shard: OutputShard; largest: string }> {
  const out = join(root, name);
  await materializeHf({
    source: { kind: "local", ckptDir: artifact },
    base: fixture.base,
    out,
    minTensors: 0,
  });
  const handle = await openFileByteSource(join(out, SHARD));
  const file = await openSafetensors(handle);
  const tensors = file.tensors.map((t) => ({
    name: t.name,
    dtype: t.dtype,
    shape: t.shape,
    byteLength: t.byteLength,
    recipe: { kind: "copy" as const, source: t.name },
  }));
  await handle.close();
  const largest = [...tensors].sort((a, b) => b.byteLength - a.byteLength)[0]!.name;
  return { out, shard: { file: SHARD, metadata: {}, tensors }, largest };
}

async function openModel(): Promise<OpenedSource> {
  const path = join(artifact, "model.pt");
  return openSource(path, path, { size: (await stat(path)).size, recordedBy: "the test" });
}

/** Flips one bit `into` bytes into tensor `name`'s data in the shard file. */
async function flip(out: string, name: string, into: number): Promise<void> {
  const path = join(out, SHARD);
  const handle = await openFileByteSource(path);
  const at = (await openSafetensors(handle)).tensor(name)!.dataOffset + into;
  await handle.close();
  const bytes = await readFile(path);
  bytes[at]! ^= 0x10;
  await writeFile(path, bytes);
}

describe("probeShard", () => {
  it("compares every copied tensor in full, file against file on a worker and through the source reader alike", async () => {
    const { out, shard } = await builtShard("intact");
    const source = await openModel();
    try {
      const bytes = sourceBytes(source);
      const total = shard.tensors.reduce((n, t) => n + t.byteLength, 0);
      const direct = await probeShard(out, shard, bytes);
      // Without the file description every tensor goes through the source reader instead.
      const read = await probeShard(out, shard, { read: bytes.read });
      for (const probe of [direct, read])
        expect(probe).toEqual({ bytes: total, tensors: shard.tensors.length, problems: [] });
    } finally {
      await source.close();
    }
  });

  it("finds one flipped bit deep inside a tensor by either path, naming the tensor", async () => {
    const { out, shard, largest } = await builtShard("flipped");
    const size = shard.tensors.find((t) => t.name === largest)!.byteLength;
    const into = size - 3;
    await flip(out, largest, into);
    const source = await openModel();
    try {
      const bytes = sourceBytes(source);
      const direct = await probeShard(out, shard, bytes);
      expect(direct.problems).toEqual([`${largest}: byte ${into} differs from the source`]);
      const read = await probeShard(out, shard, { read: bytes.read });
      expect(read.problems).toHaveLength(1);
      expect(read.problems[0]).toMatch(
        new RegExp(`^${largest.replaceAll(".", "\\.")}: bytes \\d+\\.\\.${size} differ`),
      );
    } finally {
      await source.close();
    }
  });
});
