import { copyFile, mkdir, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { writeSafetensors, writeShardedSafetensors, writeTorchFile } from "@ckpt/tensors";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { type VerifyReport, verifyProblemCodes } from "../src/commands/verify.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

const DCP_FIXTURE = join(
  import.meta.dirname,
  "..",
  "..",
  "..",
  "packages",
  "archive-reader",
  "test",
  "fixtures",
  "dcp-p2",
);

async function torchFile(path: string, values: number[]): Promise<void> {
  await mkdir(join(path, ".."), { recursive: true });
  await writeTorchFile(path, {
    tree: { w: { dtype: "F32", shape: [values.length] } },
    provideTensor: () => new Uint8Array(new Float32Array(values).buffer),
    sync: false,
  });
}

/** Overwrites the first byte of the float `value` in a torch file's data: zip and pickle still read. */
async function changeFloat(path: string, value: number): Promise<void> {
  const bytes = Buffer.from(await readFile(path));
  const at = bytes.indexOf(Buffer.from(new Float32Array([value]).buffer));
  expect(at).toBeGreaterThan(0);
  const handle = await open(path, "r+");
  await handle.write(new Uint8Array([bytes[at]! ^ 0x11]), 0, 1, at);
  await handle.close();
}

/** Runs `ckpt verify ... --json`: exit code and parsed report. */
/** A verify report, or the error document of an unusable input. */
type VerifyOutput = VerifyReport & { error: { code: string } };

async function verifyJson(...args: string[]): Promise<{ code: number; report: VerifyOutput }> {
  const c = captureIo();
  const code = await runCli(["verify", ...args, "--json"], c.io);
  return { code, report: JSON.parse(c.out()) };
}

const problemCodes = (report: VerifyOutput) => report.problems.map((p) => `${p.code} ${p.path}`).sort();

describe("ckpt verify: artifacts and stages", () => {
  async function committedArtifact(): Promise<{ root: string; dir: string }> {
    const root = await testdir();
    const dir = join(root, "run", "20260101000000", "checkpoint_artifacts", "iter_000000300");
    await torchFile(join(dir, "model.pt"), [1, 2, 3, 4]);
    expect(
      await runCli(["artifact", "commit", dir, "--components", "model", "--quiet"], captureIo().io),
    ).toBe(0);
    return { root, dir };
  }

  it("a committed artifact is sound (exit 0); a changed payload byte is a VERIFY_DIGEST_MISMATCH (exit 1)", async () => {
    const { dir } = await committedArtifact();
    const sound = await verifyJson(dir);
    expect(sound.code).toBe(0);
    expect(sound.report).toMatchObject({
      schema: "ckpt.verify-report.v1",
      ok: true,
      kind: "artifact",
      iteration: 300,
      problems: [],
      hashed: { files: 1 },
    });
    await changeFloat(join(dir, "model.pt"), 4);
    const broken = await verifyJson(dir);
    expect(broken.code).toBe(1);
    expect(problemCodes(broken.report)).toEqual(["VERIFY_DIGEST_MISMATCH model.pt"]);
    const closed = await verifyProblemCodes();
    for (const p of broken.report.problems) expect(closed).toContain(p.code);
  });

  it("an iter dir under checkpoint_artifacts without a manifest is judged as an unfinished artifact", async () => {
    const root = await testdir();
    const dir = join(root, "checkpoint_artifacts", "iter_000000005");
    await torchFile(join(dir, "model.pt"), [1]);
    const { code, report } = await verifyJson(dir);
    expect([code, report.kind, problemCodes(report)]).toEqual([
      1,
      "artifact",
      ["VERIFY_ARTIFACT_UNCOMMITTED .posttrain-checkpoint-artifact.json"],
    ]);
  });

  it("a fetched stage: publish to file://, fetch, verify the stage (exit 0); an interrupted-looking stage is named", async () => {
    const { root, dir } = await committedArtifact();
    const env = { HOME: root };
    const publish = [
      "artifact",
      "publish",
      "--artifact-dir",
      dir,
      "--upload-prefix",
      "p/g/n/20260101000000/checkpoints",
    ];
    expect(
      await runCli([...publish, "--bucket", `file://${root}/archive`, "--quiet"], captureIo({ env }).io),
    ).toBe(0);
    const uri = `file://${root}/archive/p/g/n/20260101000000/checkpoint_artifacts/iter_000000300`;
    const fetched = captureIo({ env });
    expect(
      await runCli(
        ["artifact", "fetch", "--artifact-uri", uri, "--dst", join(root, "stage"), "--json"],
        fetched.io,
      ),
    ).toBe(0);
    const stagedDir = JSON.parse(fetched.out()).staged_dir as string;
    const { code, report } = await verifyJson(stagedDir);
    expect([code, report.kind, report.ok]).toEqual([0, "stage", true]);
    await rm(join(stagedDir, "model.pt"));
    expect(problemCodes((await verifyJson(stagedDir)).report)).toEqual(["VERIFY_FILE_MISSING model.pt"]);
  });
});

describe("ckpt verify: full checkpoints, DCP directories, single files", () => {
  it("a full checkpoint iter dir with a DCP optimizer; --deep finds a changed byte only the zip CRC can see", async () => {
    const root = await testdir();
    const dir = join(root, "checkpoints", "iter_000000100");
    await torchFile(join(dir, "model.pt"), [1, 2, 3, 4, 5, 6, 7, 8]);
    await torchFile(join(dir, "trainer.pt"), [100]);
    await mkdir(join(dir, "optim"));
    for (const f of [".metadata", "__0_0.distcp", "__1_0.distcp"])
      await copyFile(join(DCP_FIXTURE, f), join(dir, "optim", f));
    expect(await verifyJson(dir)).toMatchObject({
      code: 0,
      report: { kind: "checkpoint", ok: true, iteration: 100 },
    });

    // The last float of model.pt: inside a stored member, so only its CRC-32 notices.
    await changeFloat(join(dir, "model.pt"), 8);
    expect((await verifyJson(dir)).code).toBe(0);
    const deep = await verifyJson(dir, "--deep");
    expect([deep.code, problemCodes(deep.report)]).toEqual([1, ["FILE_CRC_MISMATCH model.pt"]]);

    await truncate(join(dir, "optim", "__1_0.distcp"), 5);
    await rm(join(dir, "trainer.pt"));
    expect(problemCodes((await verifyJson(dir)).report)).toEqual([
      "DCP_FILE_SHORT optim/__1_0.distcp",
      "VERIFY_COMPONENT_MISSING trainer.pt",
    ]);
  });

  it("a DCP directory on its own", async () => {
    const dir = join(await testdir(), "optim");
    await mkdir(dir);
    for (const f of [".metadata", "__0_0.distcp", "__1_0.distcp"])
      await copyFile(join(DCP_FIXTURE, f), join(dir, f));
    expect(await verifyJson(dir)).toMatchObject({ code: 0, report: { kind: "dcp", ok: true, tensors: 3 } });
    await rm(join(dir, "__0_0.distcp"));
    const missing = await verifyJson(dir);
    expect([missing.code, problemCodes(missing.report)]).toEqual([1, ["DCP_FILE_MISSING __0_0.distcp"]]);
  });

  it("a .safetensors file: structure by default, NaN/Inf with --finite", async () => {
    const path = join(await testdir(), "model.safetensors");
    const values = new Float32Array([1, Number.NaN, -Infinity, 4]);
    await writeSafetensors(
      path,
      [{ name: "w", dtype: "F32", shape: [4] }],
      () => new Uint8Array(values.buffer),
    );
    expect(await verifyJson(path)).toMatchObject({
      code: 0,
      report: { kind: "safetensors", tensors: 1, ok: true },
    });
    const finite = await verifyJson(path, "--finite");
    expect(finite.code).toBe(1);
    expect(finite.report.problems).toEqual([
      expect.objectContaining({
        code: "TENSOR_NOT_FINITE",
        tensor: "w",
        message: expect.stringContaining("1 NaN, 1 -Inf"),
      }),
    ]);
  });

  it("prints a verdict line and a problem table; colour only when the terminal allows it", async () => {
    const path = join(await testdir(), "model.pt");
    await torchFile(path, [1, Number.NaN]);
    const plain = captureIo();
    expect(await runCli(["verify", path, "--finite"], plain.io)).toBe(1);
    const lines = plain.out().split("\n");
    expect(lines[0]).toBe(`${path}: torch 1 PROBLEM`);
    expect(lines[2]).toMatch(/^code\s+path\s+detail$/);
    expect(lines[3]).toMatch(
      /^TENSOR_NOT_FINITE\s+model\.pt\s+model\.pt: tensor "w" \(F32, 2 elements\) holds 1 NaN/,
    );
    expect(plain.out()).not.toContain("\x1b[");
    const coloured = captureIo({ color: true });
    await runCli(["verify", path, "--finite"], coloured.io);
    expect(coloured.out()).toContain("\x1b[31m1 PROBLEM\x1b[0m");
  });
});

describe("ckpt verify: Hugging Face directories", () => {
  it("index, shards and headers through hf-conversion's check; a lost shard is HF_SHARD_MISSING; --finite scans shards", async () => {
    const dir = join(await testdir(), "hf");
    const values = new Float32Array([1, 2, Number.POSITIVE_INFINITY, 4]);
    await writeShardedSafetensors(
      dir,
      [
        { name: "a", dtype: "F32", shape: [4] },
        { name: "b", dtype: "F32", shape: [4] },
      ],
      () => new Uint8Array(values.buffer),
      { maxShardBytes: 16 },
    );
    const sound = await verifyJson(dir);
    expect(sound).toMatchObject({ code: 0, report: { kind: "hf", ok: true, tensors: 2 } });
    expect(sound.report.notes[0]).toMatch(/no .materialized marker/);
    const finite = await verifyJson(dir, "--finite");
    expect(problemCodes(finite.report)).toEqual([
      "TENSOR_NOT_FINITE model-00001-of-00002.safetensors",
      "TENSOR_NOT_FINITE model-00002-of-00002.safetensors",
    ]);
    await rm(join(dir, "model-00002-of-00002.safetensors"));
    const lost = await verifyJson(dir);
    expect([lost.code, problemCodes(lost.report)]).toEqual([
      1,
      ["HF_SHARD_MISSING model-00002-of-00002.safetensors"],
    ]);
    for (const p of lost.report.problems) expect(await verifyProblemCodes()).toContain(p.code);
  });
});

describe("ckpt verify: unusable input exits 2", () => {
  it("a missing path, a directory of unknown kind, a file of no tensor format", async () => {
    const root = await testdir();
    const missing = await verifyJson(join(root, "nope"));
    expect([missing.code, missing.report.error.code]).toEqual([2, "VERIFY_PATH_MISSING"]);
    await mkdir(join(root, "photos"));
    const unknown = await verifyJson(join(root, "photos"));
    expect([unknown.code, unknown.report.error.code]).toEqual([2, "VERIFY_UNKNOWN_KIND"]);
    await writeFile(join(root, "notes.txt"), "hello");
    expect((await verifyJson(join(root, "notes.txt"))).code).toBe(2);
  });

  it("--kind forces a kind; --help teaches with examples", async () => {
    const dir = join(await testdir(), "weights");
    await torchFile(join(dir, "model.pt"), [1]);
    await torchFile(join(dir, "trainer.pt"), [1]);
    expect((await verifyJson(dir)).report.kind).toBe("checkpoint");
    expect((await verifyJson(dir, "--kind", "artifact")).report.problems[0]!.code).toBe(
      "VERIFY_ARTIFACT_UNCOMMITTED",
    );
    const help = captureIo();
    expect(await runCli(["verify", "--help"], help.io)).toBe(0);
    expect(help.out()).toContain("ckpt verify model.safetensors --finite --json");
  });
});
