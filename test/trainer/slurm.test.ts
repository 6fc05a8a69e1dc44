// @module-tag torch
// `ckpt-trainer slurm-template` under bash with a real SIGUSR1 to the batch shell only (what
// `--signal=B:SIGUSR1@N` and `scancel --signal=USR1 --batch` deliver): the trap writes the sentinel,
// the trainer sees it at its next step boundary, saves and exits 0, the script exits 0; the
// requeued script resumes from that save to weights bit-identical to an uninterrupted run.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runNode } from "../helpers/crash.js";
import {
  expectEmergencyCheckpoint,
  expectResumedToEnd,
  firstCheckpoint,
  PYTHON,
  stoppableRun,
  TRAINER_BIN,
  trainArgs,
  trainerEnv,
  uninterruptedDigest,
} from "./helpers.js";

function shellWord(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

describe("the Slurm template under bash with a real SIGUSR1", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let reference: string;

  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-slurm-");
    reference = await uninterruptedDigest(stoppableRun(join(tmp.dir, "reference")));
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it("turns SIGUSR1 to the batch shell into an emergency save, exit 0, and a resumable requeue", async () => {
    const opts = stoppableRun(join(tmp.dir, "run"));
    const logDir = join(tmp.dir, "slurm logs"); // a space: the template quotes it
    const launcher = join(tmp.dir, "launch.sh");
    await mkdir(opts.outputRoot, { recursive: true });
    await writeFile(launcher, `exec ${[PYTHON, ...trainArgs(opts)].map(shellWord).join(" ")}\n`);
    await chmod(launcher, 0o755);
    const rendered = await runNode({
      args: [
        TRAINER_BIN,
        "slurm-template",
        "--grace-seconds",
        "120",
        "--launcher",
        launcher,
        "--log-dir",
        logDir,
      ],
    });
    expect(rendered.code, rendered.stderr).toBe(0);
    const script = join(tmp.dir, "job.sbatch");
    await writeFile(script, rendered.stdout);

    const batch = spawn("bash", [script], { env: { ...process.env, ...trainerEnv() } });
    let output = "";
    batch.stdout.on("data", (d) => (output += d));
    batch.stderr.on("data", (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => batch.on("close", (code) => resolve(code)));
    await firstCheckpoint(opts.outputRoot);
    expect(existsSync(join(logDir, "SIGUSR1_RECEIVED"))).toBe(false);
    process.kill(batch.pid!, "SIGUSR1"); // to the batch shell only, as Slurm's B: delivery
    expect(await exited, output).toBe(0);
    expect(existsSync(join(logDir, "SIGUSR1_RECEIVED"))).toBe(true);
    // The trainer learnt of it from the sentinel (not from a signal of its own) and saved.
    const step = await expectEmergencyCheckpoint(opts);

    // --requeue runs the same script again: it resumes from the emergency save and finishes.
    const requeued = await runNode(
      { executable: "bash", args: [script], env: trainerEnv() },
      { timeoutMs: 180_000 },
    );
    expect(requeued.code, requeued.stderr).toBe(0);
    await expectResumedToEnd(opts, step, reference);
  });
});
