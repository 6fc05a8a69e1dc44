// @module-tag torch
// Output shards of `ckpt materialize-hf` read back by an independent reader: Python with json,
// struct, numpy and torch (read_output.py), which re-derives every expected tensor from
// torch.load of the source model.pt under the documented expert layouts and compares bit for bit.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { materializeHf } from "@ckpt/hf-conversion";
import { openHfDirectory } from "@ckpt/tensors";
import {
  makeHfFixture,
  makeModelArtifact,
  makeTempDir,
  TORCH_FIXTURE_TIMEOUT_MS,
  TORCH_PYTHON,
} from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const READER = join(import.meta.dirname, "read_output.py");
let tmp: { dir: string; cleanup: () => Promise<void> };
beforeAll(async () => {
  tmp = await makeTempDir("ckpt-hf-readers-");
});
afterAll(() => tmp.cleanup());

interface PythonReport {
  tensors: number;
  compared: number;
  problems: string[];
}

async function pythonCheck(out: string, base: string, model: string): Promise<PythonReport> {
  const { stdout } = await promisify(execFile)(TORCH_PYTHON, [READER, out, base, model], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(stdout) as PythonReport;
}

describe("a materialized directory read back by numpy and torch in Python", () => {
  it.each([
    ["dense", "dense", []],
    ["MoE, stacked fused checkpoint experts -> per-expert base keys", "moe", []],
    [
      "MoE, per-expert checkpoint keys -> stacked fused base tensors",
      "moe",
      ["--base-expert-layout", "stacked", "--ckpt-expert-layout", "per_expert"],
    ],
  ] as const)(
    "%s",
    async (label, kind, extra) => {
      const root = join(tmp.dir, label.replace(/[^a-z]+/gi, "-"));
      const fixture = await makeHfFixture(join(root, "fx"), kind, 1, 51, [
        ...extra,
        "--layers",
        "3",
        "--shards",
        "3",
      ]);
      const artifact = await makeModelArtifact(join(root, "art"), fixture.expert(0));
      const out = join(root, "teacher");
      const report = await materializeHf({
        source: { kind: "local", ckptDir: artifact },
        base: fixture.base,
        out,
        minTensors: 0,
      });
      const python = await pythonCheck(out, fixture.base, join(artifact, "model.pt"));
      expect(python.problems).toEqual([]);
      expect(python.compared).toBe(report.marker.tensor_count);
      // ckpt's own reader agrees on the count and layout.
      const hf = await openHfDirectory(out);
      expect(hf.tensors.length).toBe(python.tensors);
      expect(hf.files.map((f) => f.file).sort()).toEqual([
        "model-00001-of-00003.safetensors",
        "model-00002-of-00003.safetensors",
        "model-00003-of-00003.safetensors",
      ]);
      await hf.close();
    },
    TORCH_FIXTURE_TIMEOUT_MS,
  );

  it(
    "the reader can fail: a flipped byte in an output shard is named",
    async () => {
      const root = join(tmp.dir, "flipped");
      const fixture = await makeHfFixture(join(root, "fx"), "moe", 1, 52);
      const artifact = await makeModelArtifact(join(root, "art"), fixture.expert(0));
      const out = join(root, "teacher");
      await materializeHf({
        source: { kind: "local", ckptDir: artifact },
        base: fixture.base,
        out,
        minTensors: 0,
      });
      const { readFile, writeFile } = await import("node:fs/promises");
      const shard = join(out, "model-00002-of-00002.safetensors");
      const bytes = await readFile(shard);
      bytes.writeUInt8(bytes.readUInt8(bytes.length - 2) ^ 0x01, bytes.length - 2);
      await writeFile(shard, bytes);
      const python = await pythonCheck(out, fixture.base, join(artifact, "model.pt"));
      expect(python.problems).toEqual(["lm_head.weight: differs from the checkpoint"]);
    },
    TORCH_FIXTURE_TIMEOUT_MS,
  );
});
