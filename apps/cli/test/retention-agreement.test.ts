// Retention state is not damage: a checkpoint whose optimizer state keep_optim_last released is
// shown the same way by `ckpt verify` (sound, `retention.has_optimizer: false`), `ckpt run status`
// ("optimizer released") and `ckpt evidence` (optimizer "released"), while `ckpt resumable` and the
// manager's resume refuse it (an exact resume needs the optimizer). Half an optimizer is damage.
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { train } from "../src/demo/train.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

async function cli(args: string[]): Promise<{ code: number; out: string }> {
  const io = captureIo();
  const code = await runCli(args, io.io);
  return { code, out: io.out() };
}

/** The demo trainer's run of `steps` steps, saving every 10, keeping optimizer state in the newest `keepOptimLast`. */
async function demoRun(steps: number, keepOptimLast: number) {
  return train({
    outputRoot: await testdir("ckpt-cli-retention-"),
    name: "retention",
    steps,
    saveEvery: 10,
    keepOptimLast,
    keepModelLast: 0,
    initSeed: 1,
    taskSeed: 2,
    dataSeed: 3,
  });
}

const iterDir = (attemptDir: string, i: number) =>
  join(attemptDir, "checkpoints", `iter_${String(i).padStart(9, "0")}`);

describe("retention state agrees across verify, run status, evidence and resume", () => {
  it("an optimizer released by keep_optim_last=1: verify sound with the retention line, status and evidence say released, resume refuses", async () => {
    const run = await demoRun(30, 1);
    const older = iterDir(run.attemptDir, 20);
    expect(await readdir(older)).not.toContain("optim.pt");

    const verified = await cli(["verify", older, "--json"]);
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.out)).toMatchObject({
      ok: true,
      problems: [],
      retention: { has_optimizer: false, optimizer_released: ["optim.pt"] },
    });
    const human = await cli(["verify", older]);
    expect(human.code).toBe(0);
    expect(human.out).toContain("retention: optimizer released (keep_optim_last): optim.pt");
    const newest = JSON.parse((await cli(["verify", iterDir(run.attemptDir, 30), "--json"])).out);
    expect(newest.retention).toEqual({ has_optimizer: true, optimizer_released: [] });

    const status = await cli(["run", "status", run.attemptDir]);
    expect(status.code).toBe(0);
    expect(status.out).toMatch(/\n\s+20\s+older, not probed, optimizer released\s/);
    expect(status.out).toMatch(/\n\s+30\s+latest\s/);

    const evidence = JSON.parse((await cli(["evidence", run.attemptDir, "--json"])).out);
    expect(
      evidence.attempts[0].checkpoints.map(
        (c: { iteration: number; retention: { has_optimizer: boolean } }) => [
          c.iteration,
          c.retention.has_optimizer,
        ],
      ),
    ).toEqual([
      [30, true],
      [20, false],
      [10, false],
    ]);
    expect((await cli(["evidence", run.attemptDir])).out).toMatch(/\n\s*20\s.*\breleased\b/);

    const resumable = await cli(["resumable", older, "--json"]);
    expect(resumable.code).not.toBe(0);
    expect(resumable.out).toContain("MANAGER_RESUME_INCOMPLETE");
    expect(resumable.out).toContain("retention released the optimizer state (keep_optim_last)");
  }, 120_000);

  it("the newest optimizer gone while an older checkpoint holds one is damage, not retention", async () => {
    const run = await demoRun(20, 0);
    const newest = iterDir(run.attemptDir, 20);
    await rm(join(newest, "optim.pt"));
    const verified = await cli(["verify", newest, "--json"]);
    expect(verified.code).toBe(1);
    const report = JSON.parse(verified.out);
    expect(report.problems).toMatchObject([{ code: "VERIFY_FILE_MISSING", path: "optim.pt" }]);
    expect(report.retention).toEqual({ has_optimizer: false, optimizer_released: [] });
    const status = await cli(["run", "status", run.attemptDir]);
    expect(status.out).toMatch(/\n\s+20\s+latest, INCOMPLETE\s/);
    expect(status.out).toContain("VERIFY_FILE_MISSING optim.pt");
  }, 120_000);
});
