// `ckpt resumable <iter-dir>` on run attempts the checkpoint manager wrote for real (the demo
// trainer), then damaged, pinned and compared with the manager's own resume rules.
import { execFile } from "node:child_process";
import { truncate } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { testdir, torch2Python } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { train, type TrainResult } from "../src/demo/train.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

interface Report {
  ok: boolean;
  resumable: boolean;
  reason: string;
  code: string | null;
  iteration: number | null;
  components: Record<string, string>;
  manifest_sha256: string | null;
  latest: boolean | null;
  problems: string[];
}

async function resumable(args: string[]): Promise<{ code: number; report: Report; human: string }> {
  const json = captureIo();
  const code = await runCli(["resumable", ...args, "--json"], json.io);
  const human = captureIo();
  expect(await runCli(["resumable", ...args], human.io)).toBe(code);
  return { code, report: JSON.parse(json.out()) as Report, human: human.out() };
}

const iterDir = (run: TrainResult, i: number) =>
  join(run.attemptDir, "checkpoints", `iter_${String(i).padStart(9, "0")}`);

let tmp = "";
let kept: TrainResult; // optimizer kept for every iteration, model-only artifact at 15
let pruned: TrainResult; // optimizer kept for the newest iteration only
beforeAll(async () => {
  tmp = await testdir("ckpt-cli-resumable-");
  const common = { steps: 30, saveEvery: 10, keepModelLast: 0, initSeed: 1, taskSeed: 2, dataSeed: 3 };
  kept = await train({
    ...common,
    outputRoot: join(tmp, "a"),
    name: "kept",
    keepOptimLast: 0,
    validateAt: [15],
  });
  pruned = await train({ ...common, outputRoot: join(tmp, "b"), name: "pruned", keepOptimLast: 1 });
});

describe("ckpt resumable", () => {
  it("yes for the latest full checkpoint, with its components and manifest SHA-256 (exit 0)", async () => {
    const { code, report, human } = await resumable([iterDir(kept, 30)]);
    expect(code).toBe(0);
    expect(report).toMatchObject({
      ok: true,
      resumable: true,
      code: null,
      iteration: 30,
      latest: true,
      problems: [],
    });
    expect(Object.keys(report.components).sort()).toEqual(
      expect.arrayContaining(["model", "optim", "trainer"]),
    );
    expect(report.manifest_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(human.split("\n")[0]).toMatch(/^yes: explicit resume from .*iter_000000030 \(iter 30\)$/);
  });

  it("no when retention released its optimizer state (exit 1, the manager's code)", async () => {
    const { code, report, human } = await resumable([iterDir(pruned, 20)]);
    expect(code).toBe(1);
    expect(report).toMatchObject({
      ok: false,
      resumable: false,
      code: "MANAGER_RESUME_INCOMPLETE",
      latest: false,
    });
    expect(report.reason).toContain("optim");
    expect(human).toMatch(/^no \(MANAGER_RESUME_INCOMPLETE\): /);
  });

  it("no for a complete checkpoint behind a committed artifact of its attempt", async () => {
    const { code, report } = await resumable([iterDir(kept, 10)]);
    expect(code).toBe(1);
    expect(report.code).toBe("MANAGER_RESUME_BEHIND_ARTIFACT");
    expect(report.problems).toEqual([]); // complete, and still refused
  });

  it("no for a partial artifact", async () => {
    const artifact = join(kept.attemptDir, "checkpoint_artifacts", "iter_000000015");
    const { code, report } = await resumable([artifact]);
    expect(code).toBe(1);
    expect(report.resumable).toBe(false);
  });

  it("checks a pin: the right SHA-256 passes, another is refused, a malformed one is bad usage", async () => {
    const dir = iterDir(kept, 30);
    const sha = (await resumable([dir])).report.manifest_sha256!;
    expect((await resumable([dir, "--sha256", sha.toUpperCase()])).code).toBe(0);
    const wrong = await resumable([dir, "--sha256", "0".repeat(64)]);
    expect(wrong.code).toBe(1);
    expect(wrong.report.code).toBe("MANAGER_RESUME_PIN_MISMATCH");
    const c = captureIo();
    expect(await runCli(["resumable", dir, "--sha256", "abc"], c.io)).toBe(2);
    expect(c.err()).toContain("64 hexadecimal digits");
  });

  it("no for a torn component: the description's size no longer matches", async () => {
    const run = await train({
      outputRoot: join(tmp, "c"),
      name: "torn",
      steps: 10,
      saveEvery: 10,
      keepOptimLast: 0,
      keepModelLast: 0,
      initSeed: 1,
      taskSeed: 2,
      dataSeed: 3,
    });
    const report = (await resumable([iterDir(run, 10)])).report;
    const model = report.components.model!;
    await truncate(model, 10);
    const torn = await resumable([iterDir(run, 10)]);
    expect(torn.code).toBe(1);
    expect(torn.report.code).toBe("MANAGER_RESUME_INCOMPLETE");
    expect(torn.report.problems.join(" ")).toContain("10 bytes");
  });

  it("no for a weights-only model.pt (a state_dict, no optimizer or trainer state): it says what the file is", async () => {
    const weights = join(tmp, "model.pt");
    await promisify(execFile)(torch2Python(), [
      "-c",
      "import sys, torch\ntorch.save({'w': torch.ones(2, 2), 'b': torch.zeros(2)}, sys.argv[1])",
      weights,
    ]);
    const { code, report, human } = await resumable([weights]);
    expect(code).toBe(1);
    expect(report).toMatchObject({ resumable: false, code: "MANAGER_RESUME_INCOMPLETE" });
    expect(report.reason).toContain("holds only weights (a state_dict of 2 tensors");
    expect(human).toMatch(/^no \(MANAGER_RESUME_INCOMPLETE\): .*init_from/);
  }, 120_000);

  it("exit 2 for a path that does not exist", async () => {
    const c = captureIo();
    expect(await runCli(["resumable", join(tmp, "nope", "iter_000000010")], c.io)).toBe(2);
    expect(c.err()).toContain("does not exist");
    const j = captureIo();
    expect(await runCli(["resumable", join(tmp, "nope"), "--json"], j.io)).toBe(2);
    expect(JSON.parse(j.out())).toMatchObject({ ok: false, error: { code: "CLI_USAGE" } });
  });
});
