// @module-tag torch
import { testdir } from "@ckpt/test-utils";
import { execFileSync } from "node:child_process";
import { mkdir, readFile, rename, rm, symlink, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { checkHfDirectory, HF_DIRECTORY_PROBLEM_CODES, type HfDirectoryProblemCode } from "../src/index.js";
import { copyTree, type Fixture, makeFixture, PYTHON_TIMEOUT } from "./helpers.js";

let root: string;
let fixture: Fixture;
const SHARD1 = "model-00001-of-00002.safetensors";
const SHARD2 = "model-00002-of-00002.safetensors";
const INDEX = "model.safetensors.index.json";

beforeAll(async () => {
  root = await testdir("ckpt-hf-check-");
  fixture = await makeFixture(join(root, "fx"), "dense", 0, 11);
}, PYTHON_TIMEOUT);

let copies = 0;
async function damaged(change: (dir: string) => Promise<void>): Promise<string> {
  const dir = await copyTree(fixture.base, join(root, `copy-${copies++}`));
  await change(dir);
  return dir;
}

async function codes(dir: string): Promise<HfDirectoryProblemCode[]> {
  return (await checkHfDirectory(dir)).problems.map((p) => p.code);
}

describe("checkHfDirectory", () => {
  it("passes the generator's sharded base and reports its shards", async () => {
    const report = await checkHfDirectory(fixture.base);
    expect(report).toMatchObject({ ok: true, layout: "sharded", problems: [] });
    expect(report.shards.map((s) => s.file)).toEqual([SHARD1, SHARD2]);
    expect(report.tensorCount).toBe(report.shards.reduce((n, s) => n + s.tensorCount, 0));
  });

  it("checks a single model.safetensors when there is no index", async () => {
    const dir = await damaged(async (d) => {
      await rm(join(d, INDEX));
      await rm(join(d, SHARD2));
      await rename(join(d, SHARD1), join(d, "model.safetensors"));
    });
    expect(await checkHfDirectory(dir)).toMatchObject({ ok: true, layout: "single" });
  });

  it.each<[string, (dir: string) => Promise<void>, HfDirectoryProblemCode[]]>([
    [
      "an index with a byte-order mark",
      async (d) =>
        writeFile(
          join(d, INDEX),
          Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), await readFile(join(d, INDEX))]),
        ),
      ["HF_INDEX_INVALID"],
    ],
    ["an index that is not JSON", (d) => writeFile(join(d, INDEX), "{ nope"), ["HF_INDEX_INVALID"]],
    [
      "an empty weight_map",
      (d) => writeFile(join(d, INDEX), '{"metadata": {}, "weight_map": {}}'),
      ["HF_WEIGHT_MAP_INVALID"],
    ],
    [
      "a weight_map naming a shard outside the directory",
      (d) => writeFile(join(d, INDEX), '{"weight_map": {"a": "../escape.safetensors"}}'),
      ["HF_WEIGHT_MAP_INVALID"],
    ],
    ["a missing shard", (d) => rm(join(d, SHARD2)), ["HF_SHARD_MISSING"]],
    [
      "a shard that is a directory",
      async (d) => {
        await rm(join(d, SHARD2));
        await mkdir(join(d, SHARD2));
      },
      ["HF_SHARD_UNREADABLE"],
    ],
    [
      "a FIFO under a shard name (refused, not waited on)",
      async (d) => {
        await rm(join(d, SHARD2));
        execFileSync("mkfifo", [join(d, SHARD2)]);
      },
      ["HF_SHARD_UNREADABLE"],
    ],
    [
      "a shard that links to /dev/zero",
      async (d) => {
        await rm(join(d, SHARD1));
        await symlink("/dev/zero", join(d, SHARD1));
      },
      ["HF_SHARD_UNREADABLE"],
    ],
    [
      "a FIFO as the index",
      async (d) => {
        await rm(join(d, INDEX));
        execFileSync("mkfifo", [join(d, INDEX)]);
      },
      ["HF_INDEX_INVALID"],
    ],
    [
      "an index that links to /dev/zero (never read unbounded)",
      async (d) => {
        await rm(join(d, INDEX));
        await symlink("/dev/zero", join(d, INDEX));
      },
      ["HF_INDEX_INVALID"],
    ],
    ["a truncated shard", (d) => truncate(join(d, SHARD1), 1000), ["HF_HEADER_INVALID"]],
    [
      "a shard with trailing bytes (size is not 8 + header + data)",
      async (d) =>
        writeFile(join(d, SHARD1), Buffer.concat([await readFile(join(d, SHARD1)), Buffer.from("xx")])),
      ["HF_HEADER_INVALID"],
    ],
    [
      "an index placing a tensor in the wrong shard",
      async (d) => {
        const index = JSON.parse(await readFile(join(d, INDEX), "utf8"));
        const first = Object.keys(index.weight_map).find((k) => index.weight_map[k] === SHARD1)!;
        index.weight_map[first] = SHARD2;
        await writeFile(join(d, INDEX), JSON.stringify(index));
      },
      ["HF_KEYS_MISMATCH", "HF_KEYS_MISMATCH"],
    ],
  ])(
    "reports %s",
    async (_label, change, expected) => {
      const dir = await damaged(change);
      const report = await checkHfDirectory(dir);
      expect(report.ok).toBe(false);
      expect(report.problems.map((p) => p.code)).toEqual(expected);
      for (const p of report.problems) expect(HF_DIRECTORY_PROBLEM_CODES).toContain(p.code);
    },
    10_000,
  );

  it("collects every problem instead of stopping at the first", async () => {
    const dir = await damaged(async (d) => {
      await rm(join(d, SHARD1));
      await truncate(join(d, SHARD2), 10);
    });
    expect(await codes(dir)).toEqual(["HF_SHARD_MISSING", "HF_HEADER_INVALID"]);
  });
});
