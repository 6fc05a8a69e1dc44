import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { artifactDestinationUri } from "../src/commands/artifact/publish.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

const PREFIX = "vlm/grpo/run-a/20260901120000/checkpoints";

async function setup(model = "weights"): Promise<{ root: string; dir: string; env: NodeJS.ProcessEnv }> {
  const root = await testdir("ckpt-cli-publish-");
  const dir = join(root, "run", "checkpoint_artifacts", "iter_000000300");
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "model.pt"), model);
  expect(await runCli(["artifact", "commit", dir, "--components", "model", "--quiet"], captureIo().io)).toBe(
    0,
  );
  // HOME without a config file: no default bucket or credentials leak in from the machine.
  return { root, dir, env: { HOME: root } };
}

describe("artifactDestinationUri", () => {
  it("places the artifact beside the upload prefix, a bare bucket meaning s3", () => {
    expect(artifactDestinationUri("experiments", PREFIX, 300)).toBe(
      "s3://experiments/vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300",
    );
    expect(artifactDestinationUri("file:///mnt/archive/", PREFIX, 5)).toBe(
      "file:///mnt/archive/vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000005",
    );
  });
});

/** `ckpt artifact publish` of `dir` to `bucket` under a checkpoints upload prefix. */
function publishArgs(dir: string, bucket: string, uploadPrefix = PREFIX): string[] {
  return ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", uploadPrefix, "--bucket", bucket];
}

describe("ckpt artifact publish", () => {
  it("publishes to file://, then skips; JSON report on stdout", async () => {
    const { root, dir, env } = await setup();
    const args = [...publishArgs(dir, `file://${root}/archive`), "--json"];
    const first = captureIo({ env });
    expect(await runCli(args, first.io)).toBe(0);
    const report = JSON.parse(first.out());
    expect(report).toMatchObject({
      ok: true,
      status: "published",
      iteration: 300,
      destination: {
        scheme: "file",
        endpoint: "local",
        bucket: `${root}/archive/${PREFIX.replace("checkpoints", "checkpoint_artifacts")}/iter_000000300`,
      },
      removed: [],
      freed_bytes: 0,
    });
    expect(report.inventory.map((f: { path: string }) => f.path)).toEqual([
      ".posttrain-checkpoint-artifact.json",
      "model.pt",
    ]);
    const second = captureIo({ env });
    expect(await runCli(args, second.io)).toBe(0);
    expect(JSON.parse(second.out()).status).toBe("skipped");
  });

  it("takes the bucket from CKPT_BUCKET and releases payloads with --delete-local", async () => {
    const { root, dir, env } = await setup();
    const c = captureIo({ env: { ...env, CKPT_BUCKET: `file://${root}/archive` } });
    expect(
      await runCli(
        ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX, "--delete-local"],
        c.io,
      ),
    ).toBe(0);
    expect(c.out()).toMatch(/^file:\/\/\S+\n$/);
    expect(c.err()).toContain("published");
    expect(c.err()).toContain("released 1 local payload files");
    expect((await readdir(dir)).sort()).toEqual([".posttrain-checkpoint-artifact.json", ".uploaded"]);
  });

  it("skips a re-publish after --delete-local, and exits 1 once the archived payload is gone", async () => {
    const { root, dir, env } = await setup();
    const args = publishArgs(dir, `file://${root}/archive`);
    expect(await runCli([...args, "--delete-local"], captureIo({ env }).io)).toBe(0);
    const again = captureIo({ env });
    expect(await runCli(args, again.io)).toBe(0);
    expect(again.err()).toContain("skipped");
    expect(again.err()).toContain("1 payload files were already released locally");
    const destination = `${root}/archive/${PREFIX.replace("checkpoints", "checkpoint_artifacts")}/iter_000000300`;
    await rm(join(destination, "model.pt"));
    const lost = captureIo({ env });
    expect(await runCli([...args, "--json"], lost.io)).toBe(1);
    const error = JSON.parse(lost.out()).error;
    expect(error.code).toBe("PUBLISH_RELEASED_REMOTE_INVALID");
    expect(error.message).toContain("model.pt: missing from the destination");
    expect(error.message).toContain("cannot be re-published from a released copy");
  });

  it("exits 1 and names the remedy when the destination holds other contents", async () => {
    const a = await setup("first");
    const archive = `file://${a.root}/archive`;
    expect(await runCli(publishArgs(a.dir, archive), captureIo({ env: a.env }).io)).toBe(0);
    const b = await setup("second");
    const c = captureIo({ env: b.env });
    expect(await runCli([...publishArgs(b.dir, archive), "--json"], c.io)).toBe(1);
    const error = JSON.parse(c.out()).error;
    expect(error.code).toBe("PUBLISH_REMOTE_CONFLICT");
    expect(error.message).toContain("another destination");
  });

  it("exits 2 for a prefix that is not a checkpoints prefix, or without any bucket", async () => {
    const { root, dir, env } = await setup();
    const bad = captureIo({ env });
    expect(await runCli(publishArgs(dir, `file://${root}/x`, "a/b/run"), bad.io)).toBe(2);
    expect(bad.err()).toContain("checkpoints");
    const none = captureIo({ env });
    expect(
      await runCli(["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX], none.io),
    ).toBe(2);
    expect(none.err()).toContain("no bucket");
  });

  it("takes --upload-concurrency from 1 to 64 and refuses anything else with exit 2", async () => {
    const { root, dir, env } = await setup();
    const args = publishArgs(dir, `file://${root}/archive`);
    for (const bad of ["0", "65", "2.5", "many"]) {
      const c = captureIo({ env });
      expect(await runCli([...args, "--upload-concurrency", bad], c.io), bad).toBe(2);
      expect(c.err(), bad).toContain("--upload-concurrency");
    }
    const ok = captureIo({ env });
    expect(await runCli([...args, "--upload-concurrency", "1", "--json"], ok.io)).toBe(0);
    expect(JSON.parse(ok.out()).status).toBe("published");
  });

  it("refuses, unless --force, a prefix of another RUN_TS than the artifact's attempt, and replacing a receipt", async () => {
    const root = await testdir("ckpt-cli-publish-contradiction-");
    const dir = join(
      root,
      "vlm",
      "grpo",
      "run-a",
      "20260901120000",
      "checkpoint_artifacts",
      "iter_000000300",
    );
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "model.pt"), "weights");
    expect(
      await runCli(["artifact", "commit", dir, "--components", "model", "--quiet"], captureIo().io),
    ).toBe(0);
    const env = { HOME: root };
    const otherRun = captureIo({ env });
    const wrongPrefix = "vlm/grpo/run-a/20260902080000/checkpoints";
    expect(await runCli(publishArgs(dir, `file://${root}/archive`, wrongPrefix), otherRun.io)).toBe(2);
    expect(otherRun.err()).toContain("run attempt 20260901120000");
    expect(otherRun.err()).toContain("20260902080000");
    expect(otherRun.err()).toContain("PUBLISH_DESTINATION_CONFLICT");
    expect(await readdir(dir)).not.toContain(".uploaded");
    expect(await runCli(publishArgs(dir, `file://${root}/archive`), captureIo({ env }).io)).toBe(0);
    const elsewhere = captureIo({ env });
    expect(await runCli(publishArgs(dir, `file://${root}/mirror`), elsewhere.io)).toBe(2);
    expect(elsewhere.err()).toContain(`its .uploaded receipt binds file://${root}/archive/`);
    expect(elsewhere.err()).toContain("--force");
    const forced = captureIo({ env });
    expect(
      await runCli([...publishArgs(dir, `file://${root}/mirror`), "--force", "--quiet"], forced.io),
    ).toBe(0);
  });

  it("documents itself with examples", async () => {
    const c = captureIo();
    expect(await runCli(["artifact", "publish", "--help"], c.io)).toBe(0);
    expect(c.out()).toContain("--delete-local");
    expect(c.out()).toContain("Examples:");
  });
});
