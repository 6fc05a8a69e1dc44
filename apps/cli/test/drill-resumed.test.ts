// `ckpt drill` and `ckpt resumed` on run attempts written for real by the checkpoint manager (the
// demo trainer), loaded by ckpt's readers and by torch itself, then damaged with the file system.
import { appendFile, chmod, truncate, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir, torch2Python } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { train } from "../src/demo/train.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

async function run(steps = 30): Promise<string> {
  const root = await testdir("ckpt-drill-");
  const result = await train({
    outputRoot: join(root, "runs"),
    name: "drill",
    steps,
    saveEvery: 10,
    keepOptimLast: 1,
    keepModelLast: 0,
    initSeed: 1,
    taskSeed: 2,
    dataSeed: 3,
  });
  return result.attemptDir;
}

/** The command's JSON report and exit code; `human` also runs it without --json for its text. */
async function cli(
  args: string[],
  human = true,
): Promise<{ code: number; report: Record<string, unknown>; human: string }> {
  const json = captureIo();
  const code = await runCli([...args, "--json"], json.io);
  const text = captureIo();
  if (human) expect(await runCli(args, text.io)).toBe(code);
  return { code, report: JSON.parse(json.out()) as Record<string, unknown>, human: text.out() };
}

interface Drill {
  ok: boolean;
  unchanged: boolean;
  fingerprint_before: string;
  fingerprint_after: string;
  components: Array<{
    name: string;
    ckpt: { ok: boolean; tensors: number | null };
    torch: { ok: boolean; tensors: number } | null;
  }>;
  problems: Array<{ code: string; cause: string | null }>;
}

describe("ckpt drill", () => {
  it("loads every component through ckpt's readers and torch's, the fingerprint unchanged", async () => {
    const attempt = await run();
    const iter = join(attempt, "checkpoints", "iter_000000030");
    const { code, report } = await cli(["drill", iter, "--python", torch2Python()], false);
    const drill = report as unknown as Drill;
    expect(code).toBe(0);
    expect(drill).toMatchObject({ ok: true, unchanged: true, problems: [] });
    expect(drill.fingerprint_before).toBe(drill.fingerprint_after);
    expect(drill.components.map((c) => c.name)).toEqual(["model", "optim", "trainer"]);
    for (const c of drill.components) {
      expect(c.ckpt.ok, c.name).toBe(true);
      expect(c.torch?.ok, c.name).toBe(true);
    }
    // Both loaders count the model's tensors alike.
    const model = drill.components.find((c) => c.name === "model")!;
    expect(model.torch!.tensors).toBeGreaterThan(0);
    expect(model.ckpt.tensors).toBe(model.torch!.tensors);
    const { human } = await cli(["drill", iter]);
    expect(human).toContain("drill passed");
    expect(human).toContain("(unchanged)");
  }, 180_000);

  it("a truncated component fails both loads and the drill (exit 1), naming it", async () => {
    const attempt = await run();
    const iter = join(attempt, "checkpoints", "iter_000000030");
    await truncate(join(iter, "model.pt"), 200);
    const { code, report } = await cli(["drill", iter, "--python", torch2Python()], false);
    const drill = report as unknown as Drill;
    expect(code).toBe(1);
    expect(drill.ok).toBe(false);
    const model = drill.components.find((c) => c.name === "model")!;
    expect(model.ckpt.ok).toBe(false);
    expect(model.torch?.ok).toBe(false);
    expect(drill.problems.map((p) => p.code)).toContain("UNREADABLE_TENSOR_FILE");
    expect(drill.unchanged).toBe(true);
  }, 180_000);

  it("a loader that writes into the checkpoint fails the drill with DRILL_CHANGED_CHECKPOINT", async () => {
    const attempt = await run();
    const iter = join(attempt, "checkpoints", "iter_000000030");
    // Stands in for a Python whose loader saves back: it appends to every file it is asked to load.
    const loader = join(await testdir("ckpt-drill-loader-"), "python");
    await writeFile(
      loader,
      '#!/bin/sh\nshift 2\nwhile [ $# -gt 1 ]; do printf x >> "$2"; echo \'{"ok": true, "tensors": 0, "message": "", "duration_ms": 0}\'; shift 2; done\n',
    );
    await chmod(loader, 0o755);
    const { code, report } = await cli(["drill", iter, "--python", loader], false);
    const drill = report as unknown as Drill;
    expect(code).toBe(1);
    expect(drill.unchanged).toBe(false);
    expect(drill.fingerprint_before).not.toBe(drill.fingerprint_after);
    expect(drill.problems.map((p) => p.code)).toContain("DRILL_CHANGED_CHECKPOINT");
  }, 120_000);

  it("refuses a path that is not a directory (exit 2)", async () => {
    const c = captureIo();
    expect(await runCli(["drill", "/nonexistent/iter_000000010"], c.io)).toBe(2);
    expect(c.err()).toContain("is not a directory");
  });
});

describe("ckpt resumed", () => {
  it("came back at step 0 although a checkpoint was complete: one sentence, exit 1", async () => {
    const attempt = await run();
    const started = new Date(Date.now() + 1000).toISOString();
    const back = await cli([
      "resumed",
      "--attempt",
      attempt,
      "--reported-step",
      "0",
      "--started-at",
      started,
    ]);
    expect(back.code).toBe(1);
    expect(back.human.trim()).toBe(
      "the job came back and started at step 0, although iteration 30 was complete when it started",
    );
    expect(back.report).toMatchObject({
      ok: false,
      expected: { iteration: 30 },
      problems: [{ code: "RESUMED_BEHIND" }],
    });
    const right = await cli([
      "resumed",
      "--attempt",
      attempt,
      "--reported-step",
      "30",
      "--started-at",
      started,
    ]);
    expect(right.code).toBe(0);
    const ahead = await cli([
      "resumed",
      "--attempt",
      attempt,
      "--reported-step",
      "40",
      "--started-at",
      started,
    ]);
    expect(ahead.code).toBe(1);
    expect((ahead.report.problems as Array<{ code: string }>)[0]?.code).toBe("RESUMED_AHEAD");
  }, 120_000);

  it("counts only checkpoints committed before the job started, and only complete ones", async () => {
    const attempt = await run();
    const iter30 = join(attempt, "checkpoints", "iter_000000030");
    // Iteration 30 committed after the start: 20 is what the job should have found, but it was
    // released by retention (no optimizer), so nothing complete existed; step 0 is right.
    const later = new Date(Date.now() + 60_000);
    await utimes(join(iter30, ".posttrain-checkpoint.json"), later, later).catch(async () => {
      await utimes(iter30, later, later);
    });
    const started = new Date(Date.now() + 30_000).toISOString();
    const fresh = await cli([
      "resumed",
      "--attempt",
      attempt,
      "--reported-step",
      "0",
      "--started-at",
      started,
    ]);
    expect(fresh.report).toMatchObject({ expected: null, ok: true });
    expect(fresh.code).toBe(0);
    // A damaged newest checkpoint is not one the job could have resumed from.
    await appendFile(join(iter30, "trainer.pt"), "x");
    const now = await cli(["resumed", "--attempt", attempt, "--reported-step", "0"]);
    expect(now.report).toMatchObject({ expected: null });
  }, 120_000);

  it("refuses a step that is not one and a time that is not one (exit 2)", async () => {
    const attempt = await run(10);
    expect(await runCli(["resumed", "--attempt", attempt, "--reported-step", "-1"], captureIo().io)).toBe(2);
    expect(
      await runCli(
        ["resumed", "--attempt", attempt, "--reported-step", "1", "--started-at", "yesterday"],
        captureIo().io,
      ),
    ).toBe(2);
  }, 60_000);
});
