// `ckpt run status <attempt-dir>` on run attempts the checkpoint manager wrote for real: the demo
// trainer (cadence saves, retention, a model-only validation artifact, an interrupted save) and a
// manager holding a full checkpoint whose validation is pending. The report is the attempt's entry
// of the ckpt.evidence.v2 bundle (assembled by @ckpt/evidence, tested there); these check that it
// parses with the v2 schemas, the table and the exit codes.
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { writeTorchFile } from "@ckpt/tensors";
import { attemptSchema, type EvidenceAttempt, type EvidenceProblem, problemSchema } from "@ckpt/evidence";
import { testdir } from "@ckpt/test-utils";
import { CheckpointManager, parseManagerConfig } from "@ckpt/trainer-checkpoint-manager";
import { beforeAll, describe, expect, it } from "vitest";
import { train, type TrainResult } from "../src/demo/train.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

interface Status {
  ok: boolean;
  schema: string;
  complete: boolean;
  attempt: EvidenceAttempt;
  problems: EvidenceProblem[];
}

async function status(dir: string): Promise<{ code: number; report: Status; human: string }> {
  const json = captureIo();
  const code = await runCli(["run", "status", dir, "--json"], json.io);
  const human = captureIo();
  expect(await runCli(["run", "status", dir], human.io)).toBe(code);
  const report = JSON.parse(json.out()) as Status;
  // The v2 model's own parts: a consumer validates them with the schemas @ckpt/evidence exports.
  expect(report.schema).toBe("ckpt.evidence.v2");
  expect(attemptSchema.parse(report.attempt)).toEqual(report.attempt);
  for (const p of report.problems) expect(problemSchema.parse(p)).toEqual(p);
  return { code, report, human: human.out() };
}

const common = { steps: 30, saveEvery: 10, keepModelLast: 0, initSeed: 1, taskSeed: 2, dataSeed: 3 };
let tmp = "";
let run: TrainResult;
beforeAll(async () => {
  tmp = await testdir("ckpt-cli-run-status-");
  run = await train({
    ...common,
    outputRoot: join(tmp, "a"),
    name: "main",
    keepOptimLast: 1,
    validateAt: [15],
  });
});

describe("ckpt run status", () => {
  it("lists checkpoints newest first with components, sizes, pointer and the resume decision", async () => {
    const { code, report, human } = await status(run.attemptDir);
    expect(code).toBe(0);
    expect(report.ok).toBe(true);
    expect(report.attempt.pointer).toMatchObject({ state: "present", iteration: 30 });
    expect(report.attempt.resume).toMatchObject({ decision: "checkpoint", iteration: 30 });
    expect(report.attempt.checkpoints.map((c) => c.iteration)).toEqual([30, 20, 10]);
    const lines = human.split("\n");
    expect(lines[0]).toBe(run.attemptDir);
    expect(lines[1]).toBe("latest_checkpoint.txt: iteration 30");
    expect(lines[2]).toMatch(/^resume=auto would pick: iteration 30 \(/);
    expect(human).toMatch(/checkpoint\s+state\s+components\s+size\s+upload\s+validation/);
    expect(human).toMatch(/\n\s+30\s+latest\s+model,optim,trainer\s/);
    // 30 is complete: the older checkpoints are not probed (`ckpt resumable` judges one), yet their
    // components and sizes are listed (keep_optim_last=1 released their optimizer state).
    expect(human).toMatch(
      /\n\s+20\s+older, not probed, optimizer released\s+model,trainer\s+\d[\d.]* [KM]?i?B\s/,
    );
    expect(report.attempt.checkpoints.map((c) => c.resume.resumable)).toEqual([true, null, null]);
    expect(report.attempt.checkpoints.map((c) => [c.depth, c.format])).toEqual([
      ["probed", "consolidated"],
      ["listed", "consolidated"],
      ["listed", "consolidated"],
    ]);
    const [newest, ...older] = report.attempt.checkpoints;
    for (const c of older) {
      expect(c.components.map((x) => [x.name, x.bytes])).toEqual(
        newest!.components.filter((x) => x.name !== "optim").map((x) => [x.name, expect.any(Number)]),
      );
      expect(c.bytes).toBe(c.components.reduce((sum, x) => sum + x.bytes, 0));
      expect(c.bytes).toBeGreaterThan(0);
    }
    expect(human).toMatch(/\n\s+15\s+model\s+/);
    // The validation artifact is not archived: a warning, which does not fail the status.
    expect(report.problems.map((p) => [p.code, p.severity])).toEqual([["NOT_ARCHIVED", "warning"]]);
    expect(human).toContain("1 problem(s):\n  NOT_ARCHIVED ");
  });

  it("shows a save that never committed past the pointer, and resume staying on the pointer", async () => {
    const outputRoot = join(tmp, "b");
    await train({ ...common, steps: 10, outputRoot, name: "cut", keepOptimLast: 0 });
    const crash = new Error("simulated crash inside the save of iteration 20");
    const cut = train({
      ...common,
      steps: 20,
      outputRoot,
      name: "cut",
      keepOptimLast: 0,
      pauseInSaveAt: {
        iteration: 20,
        pause: async () => {
          throw crash;
        },
      },
    });
    await expect(cut).rejects.toBe(crash);
    const runDir = join(outputRoot, "demo", "mlp", "cut");
    const [runTs] = await readdir(runDir);
    const dir = join(runDir, runTs!);
    const { report, human } = await status(dir);
    expect(report.attempt.resume).toMatchObject({ decision: "checkpoint", iteration: 10 });
    expect(
      report.attempt.checkpoints.map((c) => [c.iteration, c.retention.latest, c.retention.past_pointer]),
    ).toEqual([
      [20, false, true],
      [10, true, false],
    ]);
    expect(human).toMatch(/\n\s+20\s+not committed\s+/);
  });

  it("reports a full checkpoint whose validation is pending", async () => {
    const outputRoot = join(tmp, "c");
    const manager = await CheckpointManager.open({
      config: parseManagerConfig({ save_every: 0, save_async: false, validation: { save_checkpoint: true } })
        .config,
      outputRoot,
      project: "p",
      group: "g",
      name: "val",
      termination: { sentinelPath: null, signals: false },
    });
    const plan = manager.planSave(5, { validation: true })!;
    expect(plan.validation).toBe("pending");
    const session = await manager.beginSave(5, plan);
    // Real torch.save files: the resume probe opens them as `ckpt verify` does.
    for (const name of ["model", "optim", "trainer"] as const) {
      await writeTorchFile(session.targets[name]!, {
        tree: { [name]: { dtype: "U8", shape: [4] } },
        provideTensor: () => new Uint8Array(4),
        sync: false,
      });
    }
    await manager.commitSave(session);
    await manager.finalize();
    const { code, report, human } = await status(manager.attemptDir);
    expect(code).toBe(0);
    expect(report.attempt.checkpoints[0]!.retention.validation).toBe("evaluation_pending");
    expect(human).toContain("pending validation: iteration 5 (evaluation_pending)");
  });

  it("exit 1 with the refusal when resume=auto would refuse (a damaged pointer)", async () => {
    const outputRoot = join(tmp, "d");
    const damaged = await train({ ...common, steps: 10, outputRoot, name: "bad", keepOptimLast: 0 });
    await writeFile(join(damaged.attemptDir, "checkpoints", "latest_checkpoint.txt"), "garbage\n");
    const { code, report, human } = await status(damaged.attemptDir);
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    expect(report.attempt.pointer.state).toBe("invalid");
    expect(report.attempt.resume).toMatchObject({
      decision: "refused",
      code: "MANAGER_RESUME_POINTER_INVALID",
    });
    expect(report.problems.map((p) => p.cause)).toContain("MANAGER_RESUME_POINTER_INVALID");
    expect(human).toContain("resume=auto would pick: REFUSED MANAGER_RESUME_POINTER_INVALID");
  });

  it("exit 2 for a directory that is not a run attempt, or no directory", async () => {
    const plain = join(tmp, "plain");
    await mkdir(plain, { recursive: true });
    const c = captureIo();
    expect(await runCli(["run", "status", plain], c.io)).toBe(2);
    expect(c.err()).toContain("neither checkpoints/ nor checkpoint_artifacts/");
    const d = captureIo();
    expect(await runCli(["run", "status", join(tmp, "absent")], d.io)).toBe(2);
  });
});
