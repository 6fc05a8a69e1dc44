// @module-tag torch
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { openStore } from "@ckpt/object-store";
import {
  fillDisk,
  makeHfFixture,
  makeModelArtifact,
  materializeHfArgs,
  smallDisk,
  TORCH_FIXTURE_TIMEOUT_MS,
  testdir,
} from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { parseLockWait } from "../src/commands/lock-wait.js";
import { runCli } from "../src/run.js";
import { publishFixture } from "./helpers/archive-fixture.js";
import { captureIo } from "./helpers/capture.js";
import { treeDigest } from "./helpers/tree.js";

let root = "";
let base = "";
let artifact = "";
let other = "";

beforeAll(async () => {
  root = await testdir("ckpt-cli-materialize-");
  const fixture = await makeHfFixture(join(root, "fx"), "moe", 2, 31);
  base = fixture.base;
  artifact = await makeModelArtifact(join(root, "a"), fixture.expert(0), { iteration: 300 });
  other = await makeModelArtifact(join(root, "b"), fixture.expert(1), { iteration: 300 });
}, TORCH_FIXTURE_TIMEOUT_MS);

let n = 0;
const out = () => join(root, "out", `t${n++}`);

/** `ckpt materialize-hf` of `source` (a --ckpt-dir, or an --artifact-uri when it has a scheme) into `dir`. */
const materialize = (source: string, dir: string, ...extra: string[]) =>
  cli(materializeHfArgs(source, base, dir, ...extra));

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const c = captureIo();
  const code = await runCli(args, c.io);
  return { code, out: c.out(), err: c.err() };
}

describe("ckpt materialize-hf", () => {
  it("builds, then skips the identical request, and prints what it did", async () => {
    const dir = out();
    const built = await materialize(artifact, dir);
    expect(built.code).toBe(0);
    expect(built.out).toBe(`${dir}\n`);
    expect(built.err).toMatch(new RegExp(`^built ${dir}: \\d+ tensors in 2 shards`));
    expect(built.err).toMatch(/verified: \d+ copied tensors .* bit for bit, \d+ expert matrices sampled/);
    const again = await materialize(artifact, dir, "--json");
    expect(again.code).toBe(0);
    expect(JSON.parse(again.out)).toMatchObject({
      ok: true,
      action: "skipped",
      out: dir,
      marker: { tensors_verified: true },
    });
  });

  it("exits 1 with the refusal for a completed output of another source, and 0 with --force", async () => {
    const dir = out();
    expect((await materialize(artifact, dir)).code).toBe(0);
    const refused = await materialize(other, dir, "--json");
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.out).error).toMatchObject({ code: "MATERIALIZE_OUTPUT_MISMATCH" });
    expect(JSON.parse(refused.out).error.message).toMatch(/^REFUSED: /);
    const human = await materialize(other, dir);
    expect(human.err).toMatch(/^ckpt: REFUSED: .* is a completed output of another request/);
    expect((await materialize(other, dir, "--force", "--no-verify", "--quiet")).code).toBe(0);
  });

  it("applies the default --min-tensors 800 to a small model", async () => {
    const r = await cli(["materialize-hf", "--ckpt-dir", artifact, "--base", base, "--out", out(), "--json"]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).error.message).toMatch(/fewer than --min-tensors 800/);
  });

  it("materializes from an archive, fetching into <out>.stage and removing what it fetched", async () => {
    const uri = `file://${join(root, "archive", "checkpoint_artifacts", "iter_000000300")}`;
    await publishFixture(await openStore(uri), new Uint8Array(await readFile(join(artifact, "model.pt"))));
    const dir = out();
    const r = await materialize(uri, dir, "--json");
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out);
    expect(report).toMatchObject({
      action: "built",
      marker: { source: { source: uri } },
      staging: { dir: join(`${dir}.stage`, "iter_000000300") },
    });
    const name = dir.split("/").at(-1)!;
    expect((await readdir(join(dir, ".."))).filter((e) => e.startsWith(name))).toEqual([name]);
    // The archive's descriptor decides the skip: nothing is fetched.
    const again = await materialize(uri, dir, "--json");
    expect(JSON.parse(again.out)).toMatchObject({ action: "skipped", staging: null });
  });

  it.each([
    [["--ckpt-dir", "x", "--artifact-uri", "file:///x"], /exactly one of --artifact-dir or --artifact-uri/],
    [[], /exactly one of --artifact-dir or --artifact-uri/],
    [["--ckpt-dir", "x", "--lock-wait-seconds", "inf"], /"inf" is not a finite number of seconds/],
    [["--ckpt-dir", "x", "--lock-wait-seconds", "nan"], /inf and nan are refused/],
    [["--ckpt-dir", "x", "--expect-tensors", "abc"], /--expect-tensors NaN is not a whole number/],
  ])("exits 2 for bad usage %j", async (extra, message) => {
    const r = await cli(["materialize-hf", "--base", base, "--out", out(), ...extra]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });

  it("parses --lock-wait-seconds as plain decimal seconds", () => {
    expect(parseLockWait("0")).toBe(0);
    expect(parseLockWait("2.5")).toBe(2.5);
    expect(parseLockWait(undefined)).toBeUndefined();
    for (const bad of ["-1", "Infinity", "1e3", ""])
      expect(() => parseLockWait(bad)).toThrow(/inf and nan are refused/);
  });

  it("documents itself with examples", async () => {
    const r = await cli(["materialize-hf", "--help"]);
    expect(r.code).toBe(0);
    for (const flag of [
      "--ckpt-dir",
      "--artifact-uri",
      "--stage-dir",
      "--keep-staged",
      "--credentials",
      "--expect-tensors",
      "--min-tensors",
      "--no-verify",
      "--force",
      "--unified-chat-template",
      "--lock-wait-seconds",
    ]) {
      expect(r.out).toContain(flag);
    }
    expect(r.out).toContain("Examples:");
  });
});

describe("ckpt materialize-hf --dry-run", () => {
  it("decides as a real run (refuse, --force build, skip) and touches nothing: no lock, no staging", async () => {
    const dir = out();
    expect((await materialize(artifact, dir, "--quiet")).code).toBe(0);
    const parent = join(dir, "..");
    const before = await treeDigest(parent);
    // The same refusal as a real run: another request's output is not replaced without --force.
    const refused = await materialize(other, dir, "--dry-run", "--json");
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.out).error).toMatchObject({ code: "MATERIALIZE_OUTPUT_MISMATCH" });
    const forced = await materialize(other, dir, "--force", "--dry-run", "--json");
    expect(forced.code, forced.out).toBe(0);
    expect(await treeDigest(parent)).toBe(before);
    expect(JSON.parse(forced.out)).toMatchObject({
      ok: true,
      dry_run: true,
      action: "build",
      out: dir,
      reason: expect.stringMatching(/^--force replaces a completed output of another request: source /),
      recover: [],
      would_replace: [
        { path: dir, reason: "replaced by the new build at the swap: it holds a complete output" },
      ],
    });
    const human = await materialize(other, dir, "--force", "--dry-run");
    expect(human.out).toMatch(
      new RegExp(`^dry run: nothing was written; would build ${dir} \\(--force replaces a completed output`),
    );
    expect(human.out).toContain(`would replace ${dir}: replaced by the new build at the swap`);
    const same = await materialize(artifact, dir, "--dry-run", "--json");
    expect(JSON.parse(same.out)).toMatchObject({ action: "skip", would_replace: [] });
    expect(await treeDigest(parent)).toBe(before);
    // The real run then does what the dry run said.
    const real = await materialize(other, dir, "--force", "--json");
    expect(JSON.parse(real.out)).toMatchObject({ ok: true, action: "built" });
    expect(await treeDigest(parent)).not.toBe(before);
  });
});

describe("ckpt materialize-hf on a full disk", () => {
  it("prints MATERIALIZE_NO_SPACE with the path and the bytes needed, exits 1, and builds once space is freed", async () => {
    const disk = await smallDisk(1024 * 1024);
    const dir = join(disk, "teacher");
    const filler = await fillDisk(disk, 1024);
    const refused = await materialize(artifact, dir);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(
      /^ckpt: materialize: the build of .*teacher: .*teacher\.tmp needs \d+ bytes, \d+ free; nothing under the final name changed; free space and run again/,
    );
    expect(JSON.parse((await materialize(artifact, dir, "--json")).out).error).toMatchObject({
      code: "MATERIALIZE_NO_SPACE",
    });
    await rm(filler);
    expect((await materialize(artifact, dir)).code).toBe(0);
  });
});
