import { mkdir, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { f32ToBf16Bytes, writeShardedSafetensors, writeTorchFile } from "@ckpt/tensors";
import { fillDisk, smallDisk, testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { splitExperts } from "../src/commands/merge.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

let tmp = "";
beforeEach(async () => {
  tmp = await testdir("ckpt-cli-merge-");
});

const shapes: Record<string, number[]> = { "model.embed_tokens.weight": [64, 32], "model.norm.weight": [32] };
const bf16 = (n: number, value: (i: number) => number) => {
  const out = new Uint8Array(n * 2);
  f32ToBf16Bytes(
    Float32Array.from({ length: n }, (_, i) => value(i)),
    out,
  );
  return out;
};
const numel = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

async function expert(name: string, k: number, keys = shapes): Promise<string> {
  const path = join(tmp, name, "model.pt");
  await mkdir(dirname(path), { recursive: true });
  const net = Object.fromEntries(
    Object.entries(keys).map(([key, shape]) => [key, { dtype: "BF16" as const, shape }]),
  );
  await writeTorchFile(path, {
    tree: { net },
    provideTensor: (_name, desc) => bf16(numel([...desc.shape]), (i) => (i % 11) * 0.01 + k),
  });
  return path;
}

async function base(): Promise<string> {
  const dir = join(tmp, "base");
  const tensors = Object.entries(shapes).map(([name, shape]) => ({ name, dtype: "BF16" as const, shape }));
  await writeShardedSafetensors(dir, tensors, (t) => bf16(numel([...t.shape]), () => 0.5), {
    maxShardBytes: 1024,
  });
  return dir;
}

const outPath = () => join(tmp, "run/checkpoint_artifacts/iter_000000300/model.pt");

async function cli(args: string[], options: { interactive?: boolean } = {}) {
  const c = captureIo(options);
  const code = await runCli(["merge", ...args], c.io);
  return { code, out: c.out(), err: c.err(), json: () => JSON.parse(c.out()) };
}

describe("ckpt merge", () => {
  it("--help lists the options and examples", async () => {
    const r = await cli(["--help"]);
    expect(r.code).toBe(0);
    for (const text of [
      "--mode",
      "--experts",
      "--base",
      "--lam",
      "--out",
      "--iteration",
      "--diag",
      "--force",
      "Examples:",
    ]) {
      expect(r.out).toContain(text);
    }
  });

  it("merges, then skips the identical request (JSON report)", async () => {
    const experts = [await expert("a", 0), await expert("b", 1), await expert("c", 2)];
    const first = await cli(["--mode", "avg", "--experts", experts.join(","), "--out", outPath(), "--json"]);
    expect(first.code).toBe(0);
    expect(first.json()).toMatchObject({
      ok: true,
      status: "merged",
      iteration: 300,
      tensors: 2,
      mode: "avg",
    });
    const again = await cli(["--mode", "avg", "--experts", experts.join(","), "--out", outPath(), "--json"]);
    expect(again.json()).toMatchObject({ ok: true, status: "skipped", model: first.json().model });
    expect((await readdir(dirname(outPath()))).sort()).toEqual([
      ".merge-complete.json",
      ".posttrain-checkpoint-artifact.json",
      "merge-diagnostics.json",
      "model.pt",
    ]);
  });

  it("prints a human summary and draws progress on a terminal only", async () => {
    const experts = [await expert("a", 0), await expert("b", 1)];
    const tv = (basePath: string) => [
      "--mode",
      "tv",
      "--base",
      basePath,
      "--lam",
      "0.5",
      "--experts",
      experts.join(","),
      "--out",
      outPath(),
    ];
    const tty = await cli(tv(await base()), { interactive: true });
    expect(tty.code).toBe(0);
    // stdout is the merged model alone; what happened goes to stderr, after the progress line.
    expect(tty.out).toBe(`${outPath()}\n`);
    expect(tty.err).toMatch(
      /merged: .*iter_000000300\/model\.pt \(base \+ 0\.5 × Σ\(expert − base\) over 2 experts; no output yet\)/,
    );
    expect(tty.err).toMatch(/2 tensors, .*, sha256 [0-9a-f]{64}/);
    expect(tty.err).toContain("merge [");
    const plain = await cli(tv(join(tmp, "base")));
    expect(plain.out).toBe(`${outPath()}\n`);
    expect(plain.err).toMatch(/^skipped: /);
  });

  it("refuses a completed different request with exit 1, naming the remedy; --force replaces it", async () => {
    const experts = [await expert("a", 0), await expert("b", 1)];
    expect((await cli(["--mode", "avg", "--experts", experts.join(","), "--out", outPath()])).code).toBe(0);
    const swapped = [...experts].reverse().join(",");
    const refused = await cli(["--mode", "avg", "--experts", swapped, "--out", outPath(), "--json"]);
    expect(refused.code).toBe(1);
    expect(refused.json()).toMatchObject({ ok: false, error: { code: "MERGE_DIFFERENT_REQUEST" } });
    expect(refused.json().error.message).toMatch(/experts\[0\].*--force/);
    const human = await cli(["--mode", "avg", "--experts", swapped, "--out", outPath()]);
    expect(human.err).toMatch(
      /^ckpt: merge into .*iter_000000300: it holds a completed merge of another request/,
    );
    expect(
      (await cli(["--mode", "avg", "--experts", swapped, "--out", outPath(), "--force", "--json"])).json()
        .status,
    ).toBe("merged");
  });

  it("exits 2 naming the key and the file when an expert lacks a tensor, and writes nothing", async () => {
    const a = await expert("a", 0);
    const b = await expert("b", 1, { "model.embed_tokens.weight": [64, 32] });
    const r = await cli(["--mode", "avg", "--experts", `${a},${b}`, "--out", outPath()]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`expert 2 (${b}) lacks tensor model.norm.weight`);
    expect(await readdir(tmp)).not.toContain("run");
  });

  it.each([
    ["tv without --base", ["--mode", "tv"], "MERGE_BAD_REQUEST"],
    ["--lam with avg", ["--mode", "avg", "--lam", "0.5"], "MERGE_BAD_REQUEST"],
    ["an --out outside iter_*/model.pt", ["--mode", "avg", "--out", "/tmp/x/model.pt"], "MERGE_BAD_OUT_PATH"],
    ["a disagreeing --iteration", ["--mode", "avg", "--iteration", "7"], "MERGE_ITERATION_MISMATCH"],
    ["an unknown mode", ["--mode", "ties"], "CLI_USAGE"],
  ])("exits 2 on %s", async (_label, args, code) => {
    const experts = [await expert("a", 0)];
    const out = args.includes("--out") ? [] : ["--out", outPath()];
    const r = await cli(["--experts", experts.join(","), ...out, ...args, "--json"]);
    expect(r.code).toBe(2);
    expect(r.json().error.code).toBe(code);
  });

  it("splits --experts on commas and keeps repeated flags in order", () => {
    expect(splitExperts("a,b")).toEqual(["a", "b"]);
    expect(splitExperts(["a,b", "c"])).toEqual(["a", "b", "c"]);
  });
});

describe("ckpt merge on a full disk", () => {
  it("prints MERGE_NO_SPACE with the path and the bytes needed, exits 1, and merges once space is freed", async () => {
    const experts = [await expert("a", 0), await expert("b", 1)];
    const disk = await smallDisk(1024 * 1024);
    const out = join(disk, "run/checkpoint_artifacts/iter_000000300/model.pt");
    const filler = await fillDisk(disk, 1024);
    const args = ["--mode", "avg", "--experts", experts.join(","), "--out", out];
    const refused = await cli(args);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(
      /^ckpt: merge: the build of .*iter_000000300: .*\.iter_000000300\.merge-staging needs \d+ bytes, \d+ free; nothing under the final name changed; free space and run again/,
    );
    expect((await cli([...args, "--json"])).json()).toMatchObject({
      ok: false,
      error: { code: "MERGE_NO_SPACE" },
    });
    await rm(filler);
    expect((await cli([...args, "--json"])).json()).toMatchObject({ ok: true, status: "merged" });
  });
});
