// buildEvidence on trees nobody should hand it: each answers with problems of the closed set, a
// bundle that parses with the v2 schema, and in bounded time; none throws or hangs.
import { execFile } from "node:child_process";
import { chmod, mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { buildEvidence, type Evidence, evidenceSchema } from "../src/index.js";

const RUN_TS = "20260901120000";

/** `<root>/proj/grp/run/<RUN_TS>/{checkpoints,checkpoint_artifacts}`: an attempt with nothing in it yet. */
async function attemptDir(): Promise<{ root: string; run: string; attempt: string }> {
  const root = await testdir("ckpt-evidence-bad-");
  const run = join(root, "proj", "grp", "run");
  const attempt = join(run, RUN_TS);
  await mkdir(join(attempt, "checkpoints"), { recursive: true });
  await mkdir(join(attempt, "checkpoint_artifacts"), { recursive: true });
  return { root, run, attempt };
}

async function evidence(path: string, options: Parameters<typeof buildEvidence>[1] = {}): Promise<Evidence> {
  const bundle = await buildEvidence(path, options);
  expect(evidenceSchema.parse(bundle)).toEqual(bundle);
  return bundle;
}

const codes = (bundle: Evidence) => bundle.problems.map((p) => p.code);

describe("buildEvidence on bad trees", () => {
  it("a missing path, a file and a directory without attempts are NOT_A_CHECKPOINT", async () => {
    const { root } = await attemptDir();
    const missing = await evidence(join(root, "nope"));
    expect(missing.problems).toMatchObject([{ code: "NOT_A_CHECKPOINT", cause: "ENOENT" }]);
    expect(missing.status).toBe("unknown");
    await writeFile(join(root, "file"), "x");
    expect(codes(await evidence(join(root, "file")))).toEqual(["NOT_A_CHECKPOINT"]);
    expect(codes(await evidence(join(root, "proj")))).toContain("NOT_A_CHECKPOINT");
  });

  it("an empty attempt is fresh, names its RUN_TS and the volume's tier", async () => {
    const { run, attempt } = await attemptDir();
    for (const bundle of [await evidence(attempt), await evidence(run)]) {
      expect(bundle.status).toBe("fresh");
      expect(bundle.run).toEqual({ dir: run, name: "run" });
      expect(bundle.attempts).toMatchObject([
        { run_ts: RUN_TS, minted: "first", minted_at: "2026-09-01T12:00:00.000Z", windows: null },
      ]);
      expect(bundle.storage).toMatchObject({ probed: false, dir: run });
      expect(["local", "shared-safe", "shared-unsafe"]).toContain(bundle.storage?.tier);
      expect(bundle.complete).toBe(true);
    }
  });

  it("a later attempt is a sibling; a run lists its attempts oldest first", async () => {
    const { run } = await attemptDir();
    await mkdir(join(run, "20260902120000", "checkpoints"), { recursive: true });
    const bundle = await evidence(run);
    expect(bundle.attempts.map((a) => [a.run_ts, a.minted])).toEqual([
      [RUN_TS, "first"],
      ["20260902120000", "sibling"],
    ]);
    expect((await evidence(join(run, "20260902120000"))).attempts[0]?.minted).toBe("sibling");
  });

  it("a symbolic link loop where the checkpoints root should be is SYMLINK_LOOP", async () => {
    const { attempt } = await attemptDir();
    await mkdir(join(attempt, "checkpoint_artifacts"), { recursive: true }).catch(() => {});
    const { rm } = await import("node:fs/promises");
    await rm(join(attempt, "checkpoints"), { recursive: true });
    await symlink("loop-b", join(attempt, "checkpoints"));
    await symlink("checkpoints", join(attempt, "loop-b"));
    const bundle = await evidence(attempt);
    expect(bundle.problems.some((p) => p.code === "SYMLINK_LOOP" && p.cause === "ELOOP")).toBe(true);
  });

  it("a latest pointer and an artifact manifest that fail validation are INVALID_POINTER and INVALID_RECORD", async () => {
    const { attempt } = await attemptDir();
    await writeFile(join(attempt, "checkpoints", "latest_checkpoint.txt"), "not a pointer\n");
    const iter = join(attempt, "checkpoint_artifacts", "iter_0000010");
    await mkdir(iter);
    await writeFile(join(iter, "manifest.json"), '{"schema": "nope", "schema": 2}');
    await writeFile(join(iter, "SUCCESS"), "");
    const bundle = await evidence(attempt);
    expect(bundle.problems.length).toBeGreaterThan(0);
    for (const p of bundle.problems) expect(p.remedy.length).toBeGreaterThan(0);
    expect(codes(bundle)).toContain("INVALID_POINTER");
  });

  it("100,000 entries: TREE_TOO_LARGE, answered within the bound", async () => {
    const { attempt } = await attemptDir();
    const root = join(attempt, "checkpoints");
    // Empty files keep the setup quick; the bound is on entries, whatever they are.
    const names = Array.from({ length: 100_000 }, (_, i) => `iter_${String(i).padStart(7, "0")}`);
    for (let i = 0; i < names.length; i += 2000)
      await Promise.all(names.slice(i, i + 2000).map((n) => writeFile(join(root, n), "")));
    const started = performance.now();
    const bundle = await evidence(attempt);
    const took = performance.now() - started;
    expect(codes(bundle)).toContain("TREE_TOO_LARGE");
    expect(bundle.complete).toBe(false);
    expect(bundle.attempts[0]?.resume.decision).toBe("unknown");
    expect(took).toBeLessThan(10_000);
    const raised = await evidence(attempt, { maxEntries: 200_000, timeoutMs: 60_000 });
    expect(codes(raised)).not.toContain("TREE_TOO_LARGE");
  }, 180_000);

  it("a time bound too short for the tree is TIMED_OUT with what was gathered", async () => {
    const { attempt } = await attemptDir();
    const bundle = await evidence(attempt, { timeoutMs: 0 });
    expect(codes(bundle)).toEqual(["TIMED_OUT"]);
    expect(bundle.complete).toBe(false);
  });

  it("a collection its caller cancels stops with ABORTED, and the manager's scan stops with it", async () => {
    const { attempt } = await attemptDir();
    for (let i = 1; i <= 200; i++)
      await mkdir(join(attempt, "checkpoints", `iter_${String(i).padStart(9, "0")}`));
    const cancelled = await evidence(attempt, { signal: AbortSignal.abort() });
    expect(codes(cancelled)).toEqual(["ABORTED"]);
    expect(cancelled.complete).toBe(false);
    // The signal reaches the libraries: the manager's collection refuses to go on once it fired.
    const { collectEvidence } = await import("@ckpt/trainer-checkpoint-manager");
    await expect(collectEvidence(attempt, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: "MANAGER_ABORTED",
    });
    const whole = await evidence(attempt, { signal: new AbortController().signal });
    expect(whole.complete).toBe(true);
    expect(whole.attempts[0]?.checkpoints).toHaveLength(200);
  });

  it("an unreadable directory is UNREADABLE_PATH (collected by an unprivileged process)", async () => {
    const { root, attempt } = await attemptDir();
    await chmod(root, 0o755);
    await chmod(join(attempt, "checkpoints"), 0o000);
    const entry = new URL("../dist/index.js", import.meta.url).pathname;
    const script = `import(${JSON.stringify(entry)}).then(async (m) => process.stdout.write(JSON.stringify(await m.buildEvidence(process.argv[1]))))`;
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ["-e", script, attempt],
        { uid: 65534, gid: 65534, timeout: 60_000 },
        (error, stdout, stderr) =>
          error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
      ),
    );
    await chmod(join(attempt, "checkpoints"), 0o755);
    const bundle = evidenceSchema.parse(JSON.parse(out));
    expect(bundle.problems).toContainEqual(
      expect.objectContaining({
        code: "UNREADABLE_PATH",
        cause: "EACCES",
        subject: join(attempt, "checkpoints"),
      }),
    );
  }, 120_000);
});
