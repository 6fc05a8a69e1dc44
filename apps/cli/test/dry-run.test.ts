import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { writeTorchFile } from "@ckpt/tensors";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";
import { treeDigest } from "./helpers/tree.js";

// --dry-run on the commands that delete or replace: the same decision as a real run, nothing
// touched (the tree hashes the same before and after), and the report names what would go.

const PREFIX = "vlm/grpo/run-a/20260901120000/checkpoints";

async function committed(): Promise<{ root: string; dir: string; env: NodeJS.ProcessEnv }> {
  const root = await testdir("ckpt-cli-dry-");
  const dir = join(root, "run", "checkpoint_artifacts", "iter_000000300");
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "model.pt"), "w".repeat(2048));
  expect(await runCli(["artifact", "commit", dir, "--components", "model", "--quiet"], captureIo().io)).toBe(
    0,
  );
  return { root, dir, env: { HOME: root } };
}

describe("artifact publish --delete-local --dry-run", () => {
  it("before a first publish: would upload and release model.pt, and nothing changes", async () => {
    const { root, dir, env } = await committed();
    const publish = ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX];
    const args = [...publish, "--bucket", `file://${root}/archive`, "--delete-local", "--dry-run"];
    const before = await treeDigest(root);
    const c = captureIo({ env });
    expect(await runCli([...args, "--json"], c.io)).toBe(0);
    expect(await treeDigest(root)).toBe(before);
    expect(JSON.parse(c.out())).toMatchObject({
      ok: true,
      dry_run: true,
      uploaded: [],
      removed: [],
      would_upload: ["model.pt"],
      would_remove: [
        { path: "model.pt", bytes: 2048, reason: expect.stringMatching(/^--delete-local: a payload/) },
      ],
    });
    const human = captureIo({ env });
    expect(await runCli(args, human.io)).toBe(0);
    expect(human.out()).toMatch(
      /^dry run: nothing was uploaded, written or released; .* would upload 1 files: model\.pt/,
    );
    expect(human.out()).toMatch(/would release model\.pt \(2\.0 KiB\): --delete-local/);
    expect(await treeDigest(root)).toBe(before);
  });

  it("after a publish: would upload nothing and release model.pt; the real run then does exactly that", async () => {
    const { root, dir, env } = await committed();
    const publish = ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX];
    const args = [...publish, "--bucket", `file://${root}/archive`];
    expect(await runCli([...args, "--quiet"], captureIo({ env }).io)).toBe(0);
    const before = await treeDigest(root);
    const c = captureIo({ env });
    expect(await runCli([...args, "--delete-local", "--dry-run", "--json"], c.io)).toBe(0);
    expect(await treeDigest(root)).toBe(before);
    expect(JSON.parse(c.out())).toMatchObject({
      dry_run: true,
      would_upload: [],
      would_remove: [{ path: "model.pt" }],
    });
    const real = captureIo({ env });
    expect(await runCli([...args, "--delete-local", "--json"], real.io)).toBe(0);
    expect(JSON.parse(real.out())).toMatchObject({ removed: ["model.pt"] });
    expect(await readdir(dir)).not.toContain("model.pt");
  });
});

/** A one-tensor F32 expert `{net: {w}}` filled with `value`. */
async function expert(path: string, value: number): Promise<string> {
  await mkdir(join(path, ".."), { recursive: true });
  await writeTorchFile(path, {
    tree: { net: { w: { dtype: "F32" as const, shape: [8] } } },
    provideTensor: () => new Uint8Array(Float32Array.from({ length: 8 }, () => value).buffer),
  });
  return path;
}

describe("merge --force --dry-run", () => {
  it("names the completed output a forced merge would replace, and replaces nothing", async () => {
    const root = await testdir("ckpt-cli-dry-");
    const a = await expert(join(root, "a", "model.pt"), 1);
    const b = await expert(join(root, "b", "model.pt"), 3);
    const c3 = await expert(join(root, "c", "model.pt"), 5);
    const out = join(root, "run", "checkpoint_artifacts", "iter_000000300", "model.pt");
    const merge = (experts: string[], extra: string[] = []) => {
      const c = captureIo();
      return runCli(
        ["merge", "--mode", "avg", "--experts", experts.join(","), "--out", out, ...extra],
        c.io,
      ).then((code) => ({ code, out: c.out(), err: c.err() }));
    };
    expect((await merge([a, b], ["--quiet"])).code).toBe(0);
    const before = await treeDigest(root);
    // The same refusal as a real run: another request's output is not replaced without --force.
    expect((await merge([a, b, c3], ["--dry-run"])).code).toBe(1);
    const forced = await merge([a, b, c3], ["--force", "--dry-run", "--json"]);
    expect(forced.code).toBe(0);
    expect(await treeDigest(root)).toBe(before);
    const report = JSON.parse(forced.out);
    expect(report).toMatchObject({
      ok: true,
      dry_run: true,
      action: "build",
      reason: expect.stringMatching(/^--force replaces a merge of another request/),
    });
    expect(report.would_replace).toEqual(expect.arrayContaining(["model.pt", ".merge-complete.json"]));
    const same = await merge([a, b], ["--dry-run"]);
    expect(same.out).toMatch(
      /^dry run: nothing was written; would skip .*model\.pt \(the same request completed here/,
    );
    expect(await treeDigest(root)).toBe(before);
  });
});
