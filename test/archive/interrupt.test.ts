// @module-tag crash
// @module-tag s3
// @module-tag torch
// SIGINT/SIGTERM to the built CLI while a long command is mid-transfer (the signal is sent once
// its temporary or partial file exists): it stops cleanly, removes what it made in this run,
// prints one line saying what it left and how to resume, reports the abort code under --json,
// and exits 130 (SIGINT) or 143 (SIGTERM). The resume the line promises then works.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { f32ToBf16Bytes, writeTorchFile } from "@ckpt/tensors";
import {
  createTestBucket,
  makeHfFixture,
  openMultipartUploads,
  s3TestEnv,
  TORCH_FIXTURE_TIMEOUT_MS,
  testCredentials,
  testdir,
} from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { CLI_BIN, REPO_ROOT, runNode } from "../helpers/crash.js";

const PREFIX = "vlm/grpo/run-a/20260901120000/checkpoints";
/** Big enough that a transfer is still running when the test sees its first temporary file. */
const MODEL_BYTES = 256 << 20;

interface Stopped {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Every path under `dir` (relative), or none when it does not exist yet. */
async function tree(dir: string): Promise<string[]> {
  return readdir(dir, { recursive: true }).catch(() => []);
}

/**
 * Runs the CLI with `args`, sends `signal` once `ready()` holds (polled), and resolves when the
 * process has exited. Fails when the command ended before it was ready: the signal must land
 * mid-operation.
 */
function interrupt(
  args: readonly string[],
  signal: "SIGINT" | "SIGTERM",
  ready: () => Promise<boolean>,
): Promise<Stopped> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_BIN, ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, NODE_NO_WARNINGS: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let exited = false;
    let sent = false;
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("exit", () => {
      exited = true;
    });
    child.on("close", (code) => {
      if (!sent)
        reject(new Error(`ckpt ${args.join(" ")} ended (${code}) before the signal: ${stderr}${stdout}`));
      else resolve({ code, stdout, stderr });
    });
    const poll = async () => {
      while (!exited) {
        if (await ready()) {
          sent = child.kill(signal);
          return;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    poll().catch(reject);
  });
}

/** The one stderr line and the JSON report of an interrupted command. */
function expectStopped(result: Stopped, code: 130 | 143, abortCode: string, leaves: RegExp): void {
  const signal = code === 130 ? "SIGINT" : "SIGTERM";
  expect(result.stderr.trim().split("\n"), result.stderr).toHaveLength(1);
  expect(result.stderr).toMatch(new RegExp(`^interrupted \\(${signal}\\): `));
  expect(result.stderr).toMatch(leaves);
  expect(result.stderr).toMatch(/run the same command again/);
  expect(JSON.parse(result.stdout)).toMatchObject({
    ok: false,
    interrupted: signal,
    error: { code: abortCode },
  });
  expect(result.code).toBe(code);
}

async function cliOk(args: readonly string[]): Promise<string> {
  const result = await runNode({ args: [CLI_BIN, ...args] });
  expect(result.code, result.stderr).toBe(0);
  return result.stdout;
}

/** A committed consolidated artifact holding a `MODEL_BYTES` model.pt. */
async function bigArtifact(root: string): Promise<string> {
  const dir = join(root, "local", "20260901120000", "checkpoint_artifacts", "iter_000000300");
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "model.pt"), randomBytes(MODEL_BYTES));
  await cliOk(["artifact", "commit", dir, "--components", "model", "--quiet"]);
  return dir;
}

const publishArgs = (dir: string, bucket: string) => [
  "artifact",
  "publish",
  "--artifact-dir",
  dir,
  "--upload-prefix",
  PREFIX,
  "--bucket",
  bucket,
  "--json",
];

describe("interrupting the CLI's long commands", () => {
  let root = "";
  let artifact = "";
  let archiveUri = "";
  beforeAll(async () => {
    root = await testdir("ckpt-interrupt-");
    artifact = await bigArtifact(root);
    archiveUri = `file://${root}/archive/vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300`;
  });

  it("publish to file:// on SIGINT: no temporary left, nothing published, exit 130; a re-run publishes", async () => {
    const archive = join(root, "archive");
    const result = await interrupt(publishArgs(artifact, `file://${archive}`), "SIGINT", async () =>
      (await tree(archive)).some((p) => p.includes(".ckpt-tmp.")),
    );
    expectStopped(result, 130, "PUBLISH_ABORTED", /^interrupted \(SIGINT\): nothing published/);
    const left = await tree(archive);
    expect(left.filter((p) => p.includes(".ckpt-tmp."))).toEqual([]);
    expect(left.filter((p) => p.endsWith(".posttrain-checkpoint-artifact.json"))).toEqual([]);
    expect(JSON.parse(await cliOk(publishArgs(artifact, `file://${archive}`)))).toMatchObject({
      ok: true,
      status: "published",
    });
  });

  it("fetch on SIGINT: exit 130, the staged download kept; a re-run completes it", async () => {
    const dst = join(root, "fetched");
    const args = ["artifact", "fetch", "--artifact-uri", archiveUri, "--dst", dst, "--json"];
    const result = await interrupt(args, "SIGINT", async () =>
      (await tree(dst)).some((p) => p.includes("model.pt")),
    );
    expectStopped(result, 130, "READER_ABORTED", /staged download kept in /);
    const report = JSON.parse(await cliOk(args));
    expect(report).toMatchObject({ ok: true, staged_dir: join(dst, "iter_000000300") });
    expect((await readFile(join(dst, "iter_000000300", "model.pt"))).length).toBe(MODEL_BYTES);
  });

  it("store download on SIGTERM: exit 143, no partial file left", async () => {
    const local = join(root, "downloaded");
    const args = ["store", "download", archiveUri, local, "--json"];
    const result = await interrupt(args, "SIGTERM", async () =>
      (await tree(local)).some((p) => p.endsWith(".part")),
    );
    expectStopped(result, 143, "STORE_ABORTED", /keeps the files downloaded so far/);
    expect((await tree(local)).filter((p) => p.endsWith(".part"))).toEqual([]);
  });

  it("store copy on SIGINT: exit 130, no temporary left in the destination", async () => {
    const copy = join(root, "copy");
    const args = ["store", "copy", archiveUri, `file://${copy}`, "--json"];
    const result = await interrupt(args, "SIGINT", async () =>
      (await tree(copy)).some((p) => p.includes(".ckpt-tmp.")),
    );
    expectStopped(result, 130, "STORE_ABORTED", /keeps the objects copied so far/);
    expect((await tree(copy)).filter((p) => p.includes(".ckpt-tmp."))).toEqual([]);
  });

  it("publish to S3 on SIGTERM: the multipart upload is aborted, exit 143", async () => {
    const env = s3TestEnv();
    const { bucket, cleanup } = await createTestBucket(env, "interrupt");
    const credentials = join(root, "credentials.json");
    await writeFile(credentials, JSON.stringify(testCredentials(env)));
    const prefix = "vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300/";
    const uploads = () => openMultipartUploads(env, bucket, prefix);
    try {
      // Its own artifact: the one published to file:// above holds a receipt binding that store.
      const fresh = await bigArtifact(join(root, "s3"));
      const args = [...publishArgs(fresh, bucket), "--credentials", credentials];
      const result = await interrupt(args, "SIGTERM", async () => (await uploads()).length > 0);
      expectStopped(result, 143, "PUBLISH_ABORTED", /nothing published: s3:\/\//);
      expect(await uploads()).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("interrupting merge and materialize-hf", () => {
  let root = "";
  beforeAll(async () => {
    root = await testdir("ckpt-interrupt-build-");
  });

  it("merge on SIGINT: exit 130, the output untouched, no staging or lock left", async () => {
    const shape = [4096, 8192]; // 64 MiB of bf16 per expert
    const experts: string[] = [];
    for (const k of [1, 2]) {
      const path = join(root, `expert${k}`, "model.pt");
      await mkdir(join(root, `expert${k}`), { recursive: true });
      await writeTorchFile(path, {
        tree: { net: { "model.embed_tokens.weight": { dtype: "BF16" as const, shape } } },
        provideTensor: () => {
          const values = new Float32Array(shape[0]! * shape[1]!).fill(k);
          const out = new Uint8Array(values.length * 2);
          f32ToBf16Bytes(values, out);
          return out;
        },
      });
      experts.push(path);
    }
    const artifacts = join(root, "run", "checkpoint_artifacts");
    const out = join(artifacts, "iter_000000300", "model.pt");
    const args = ["merge", "--mode", "avg", "--experts", experts.join(","), "--out", out, "--json"];
    const result = await interrupt(args, "SIGINT", async () =>
      (await tree(artifacts)).some((p) => p.startsWith(".iter_000000300.merge-staging/")),
    );
    expectStopped(result, 130, "MERGE_ABORTED", /was not changed/);
    expect(await tree(artifacts)).toEqual([]);
  });

  it(
    "materialize-hf on SIGTERM while it fetches: exit 143, no output, staging or lock left",
    async () => {
      const fixture = await makeHfFixture(join(root, "fx"), "moe", 2, 31);
      const artifact = await bigArtifact(root);
      const archive = join(root, "archive");
      await cliOk(publishArgs(artifact, `file://${archive}`));
      const uri = `file://${archive}/vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300`;
      const out = join(root, "hf", "teacher");
      const args = ["materialize-hf", "--artifact-uri", uri, "--base", fixture.base, "--out", out, "--json"];
      const result = await interrupt(args, "SIGTERM", async () =>
        (await tree(`${out}.stage`)).some((p) => p.includes("model.pt")),
      );
      expectStopped(result, 143, "MATERIALIZE_ABORTED", /was not changed .*and what it fetched were removed/);
      expect(
        (await tree(join(root, "hf"))).filter((p) => p === "teacher" || p.startsWith("teacher/")),
      ).toEqual([]);
    },
    TORCH_FIXTURE_TIMEOUT_MS,
  );
});
