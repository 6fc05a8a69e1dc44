// @module-tag torch
// The emergency save on the sentinel file: a run sees $SLURM_LOG_DIR/SIGUSR1_RECEIVED at a step
// boundary, writes one full checkpoint, exits 0; the unchanged command resumes from it and ends
// with weights bit-identical to an uninterrupted run.
import { spawn } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  expectEmergencyCheckpoint,
  expectResumedToEnd,
  firstCheckpoint,
  PYTHON,
  runTrainer,
  stoppableRun,
  trainArgs,
  trainerEnv,
  uninterruptedDigest,
} from "./helpers.js";

describe("emergency save on the sentinel file (real PyTorch)", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let reference: string;

  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-emergency-");
    reference = await uninterruptedDigest(stoppableRun(join(tmp.dir, "reference")));
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it("saves once, exits 0, and the rerun resumes from that save to the same weights", async () => {
    const logDir = join(tmp.dir, "slurm-logs");
    await mkdir(logDir, { recursive: true });
    const opts = stoppableRun(join(tmp.dir, "run"), { SLURM_LOG_DIR: logDir });
    const child = spawn(PYTHON, trainArgs(opts), { env: { ...process.env, ...trainerEnv(opts.env) } });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    const first = await firstCheckpoint(opts.outputRoot);
    await writeFile(join(logDir, "SIGUSR1_RECEIVED"), "");
    expect(await exited, stderr).toBe(0);
    const step = await expectEmergencyCheckpoint(opts);
    expect(step).toBeGreaterThanOrEqual(first);

    // Requeue: the same command; the sentinel left from before is not a new request.
    const rerun = await runTrainer(opts);
    expect(rerun.code, rerun.stderr).toBe(0);
    await expectResumedToEnd(opts, step, reference);
  });
});
