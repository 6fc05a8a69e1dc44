import { cp, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeSafetensors } from "@ckpt/tensors";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

let dir = "";
let file = "";
beforeAll(async () => {
  dir = await testdir("ckpt-cli-inspect-");
  file = join(dir, "model.safetensors");
  await writeSafetensors(
    file,
    [
      { name: "model.embed_tokens.weight", dtype: "BF16", shape: [4, 2] },
      { name: "lm_head.bias", dtype: "F32", shape: [4] },
    ],
    (t) => new Uint8Array(t.byteLength),
  );
});

describe("ckpt inspect", () => {
  it("prints an aligned table of name, dtype, shape and bytes", async () => {
    const c = captureIo();
    expect(await runCli(["inspect", file], c.io)).toBe(0);
    const lines = c.out().trimEnd().split("\n");
    expect(lines[0]).toBe(`${file}: safetensors, 1 file, 2 tensors, 32 B`);
    expect(lines.slice(2)).toEqual([
      "name                       dtype  shape   bytes",
      "model.embed_tokens.weight  BF16   [4, 2]     16",
      "lm_head.bias               F32    [4]        16",
    ]);
  });

  it("adds SHA-256 columns and prints JSON with --sha256 --json", async () => {
    const c = captureIo();
    expect(await runCli(["inspect", file, "--sha256", "--json"], c.io)).toBe(0);
    const report = JSON.parse(c.out());
    expect(report).toMatchObject({ ok: true, kind: "safetensors", files: [{ file: "model.safetensors" }] });
    expect(report.tensors[0]).toEqual({
      name: "model.embed_tokens.weight",
      dtype: "BF16",
      shape: [4, 2],
      bytes: 16,
      file: "model.safetensors",
      sha256: "374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb",
    });
  });

  it("a DCP directory: tensors with global shapes, its files, and a missing shard by name (exit 1)", async () => {
    const dcp = join(dir, "dcp");
    await cp(
      join(import.meta.dirname, "..", "..", "..", "packages", "archive-reader", "test", "fixtures", "dcp-p2"),
      dcp,
      {
        recursive: true,
      },
    );
    const c = captureIo();
    expect(await runCli(["inspect", dcp], c.io)).toBe(0);
    expect(c.out()).toMatch(/^model\.w +BF16 +\[8, 4\]/m);
    expect(c.out()).toMatch(/^__1_0\.distcp +\d+$/m);
    expect(c.out()).toContain("complete: every chunk's file is present and long enough");
    await rm(join(dcp, "__1_0.distcp"));
    const j = captureIo();
    expect(await runCli(["inspect", dcp, "--json"], j.io)).toBe(1);
    expect(JSON.parse(j.out())).toMatchObject({
      ok: false,
      kind: "dcp",
      problems: [{ code: "DCP_FILE_MISSING", file: "__1_0.distcp", tensor: "model.w", chunk: [4, 0] }],
    });
  });

  it("exits 2 with the error code for a corrupt or unknown input", async () => {
    const c = captureIo();
    expect(await runCli(["inspect", join(dir, "nope")], c.io)).toBe(2);
    expect(c.err()).toContain("no such file or directory");
    const j = captureIo();
    expect(await runCli(["inspect", join(dir, "nope"), "--json"], j.io)).toBe(2);
    expect(JSON.parse(j.out())).toMatchObject({ ok: false, error: { code: "INSPECT_NOT_FOUND" } });
  });

  it("draws hashing progress on stderr only on a terminal", async () => {
    const tty = captureIo({ interactive: true });
    expect(await runCli(["inspect", file, "--sha256"], tty.io)).toBe(0);
    expect(tty.err()).toContain("hash [");
    const pipe = captureIo();
    expect(await runCli(["inspect", file, "--sha256"], pipe.io)).toBe(0);
    expect(pipe.err()).toBe("");
  });

  it("documents itself with an example", async () => {
    const c = captureIo();
    expect(await runCli(["inspect", "--help"], c.io)).toBe(0);
    expect(c.out()).toContain("ckpt inspect model.safetensors");
    expect(c.out()).toContain("--sha256");
  });
});
