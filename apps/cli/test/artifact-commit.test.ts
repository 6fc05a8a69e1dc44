import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

async function artifactDir(): Promise<string> {
  const dir = await testdir("ckpt-cli-commit-");
  const iter = join(dir, "checkpoint_artifacts", "iter_000000300");
  await mkdir(iter, { recursive: true });
  await writeFile(join(iter, "model.pt"), "weights");
  await writeFile(join(iter, "optim.pt"), "stale optimizer");
  return iter;
}

describe("ckpt artifact commit", () => {
  it("commits the planned components and reports what it left out", async () => {
    const dir = await artifactDir();
    const c = captureIo();
    expect(
      await runCli(
        ["artifact", "commit", dir, "--components", "model", "--iteration", "300", "--json"],
        c.io,
      ),
    ).toBe(0);
    const report = JSON.parse(c.out());
    expect(report).toMatchObject({
      ok: true,
      ignored: ["optim.pt"],
      manifest: { iteration: 300, logical_components: ["model"] },
    });
    const human = captureIo();
    expect(await runCli(["artifact", "commit", dir, "--components", "model"], human.io)).toBe(1);
    expect(human.err()).toContain("already holds .posttrain-checkpoint-artifact.json");
  });

  it("exits 2 for an unknown component or a mismatched iteration", async () => {
    const dir = await artifactDir();
    const c = captureIo();
    expect(await runCli(["artifact", "commit", dir, "--components", "weights", "--json"], c.io)).toBe(2);
    expect(JSON.parse(c.out()).error.code).toBe("COMMIT_BAD_COMPONENTS");
    const d = captureIo();
    expect(await runCli(["artifact", "commit", dir, "--components", "model", "--iteration", "7"], d.io)).toBe(
      2,
    );
    expect(d.err()).toContain("iteration 7");
  });

  it("exits 1 when a listed component is missing", async () => {
    const dir = await artifactDir();
    const c = captureIo();
    expect(await runCli(["artifact", "commit", dir, "--json"], c.io)).toBe(1);
    expect(JSON.parse(c.out()).error.code).toBe("COMMIT_COMPONENT_MISSING");
  });

  it("refuses a full checkpoint (checkpoints/iter_*), and publish points to how a full checkpoint is archived", async () => {
    const root = await testdir("ckpt-cli-commit-full-");
    const full = join(root, "checkpoints", "iter_000000100");
    await mkdir(full, { recursive: true });
    await writeFile(join(full, "model.pt"), "weights");
    await writeFile(join(full, "optim.pt"), "optimizer");
    const commit = captureIo();
    expect(await runCli(["artifact", "commit", full, "--json"], commit.io)).toBe(2);
    const refusal = JSON.parse(commit.out()).error;
    expect(refusal.code).toBe("COMMIT_FULL_CHECKPOINT");
    expect(refusal.message).toContain("upload.enabled");
    expect((await readdir(full)).sort()).toEqual(["model.pt", "optim.pt"]);
    const publish = captureIo();
    const args = [
      "artifact",
      "publish",
      "--artifact-dir",
      full,
      "--upload-prefix",
      "p/g/n/20260901120000/checkpoints",
    ];
    expect(await runCli([...args, "--bucket", `file://${root}/archive`], publish.io)).toBe(2);
    expect(publish.err()).toContain("PUBLISH_FULL_CHECKPOINT");
    expect(publish.err()).toContain("upload.enabled");
  });

  it("documents itself with examples", async () => {
    const c = captureIo();
    expect(await runCli(["artifact", "commit", "--help"], c.io)).toBe(0);
    expect(c.out()).toContain("--components");
    expect(c.out()).toContain("Examples:");
  });
});
