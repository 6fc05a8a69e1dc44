// @module-tag torch
// Seed 001 "Pending model validation" driven by the example PyTorch trainer: with
// validation.save_checkpoint the validated step is saved evaluation-pending, validated, then
// published through complete_validation; a publication that fails stays publication-pending and
// the unchanged command publishes it on resume without validating again.
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  attemptDirs,
  checkLatestPointer,
  readResult,
  runTrainer,
  type TrainOptions,
  uninterruptedDigest,
} from "./helpers.js";

const VALIDATION_RECORD = ".posttrain-validation.json";

async function validationState(iterDir: string): Promise<string> {
  return (JSON.parse(await readFile(join(iterDir, VALIDATION_RECORD), "utf8")) as { state: string }).state;
}

describe("validation saves driven by the example trainer (real PyTorch)", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-trainer-validation-");
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  const run = (name: string, extra: Partial<TrainOptions> = {}): TrainOptions => {
    const outputRoot = join(tmp.dir, name);
    return { outputRoot, steps: 6, saveEvery: 3, result: join(outputRoot, "result.json"), ...extra };
  };

  it("each validated step is saved pending, validated, then published; training is unchanged", async () => {
    const reference = await uninterruptedDigest(run("reference"));
    const opts = run("validated", { validateEvery: 2, config: { validation: { save_checkpoint: true } } });
    const done = await runTrainer(opts);
    expect(done.code, done.stderr.slice(-3000)).toBe(0);
    const result = await readResult(opts.result);
    expect(result.digest).toBe(reference);
    expect(result.validations?.map((v) => v.step)).toEqual([2, 4, 6]);
    for (const v of result.validations ?? []) expect(Number.isFinite(v.loss)).toBe(true);
    const iter = (step: number) => join(result.attempt_dir, "checkpoints", `iter_00000000${step}`);
    for (const step of [2, 4, 6]) expect(await validationState(iter(step))).toBe("published");
    // The cadence-only save at step 3 carries no validation transaction.
    await expect(readFile(join(iter(3), VALIDATION_RECORD))).rejects.toMatchObject({ code: "ENOENT" });
    expect(done.stderr).toMatch(/validated step 4 \(loss [0-9.]+\): published/);
    expect((await checkLatestPointer(result.attempt_dir))?.iteration).toBe(6);
  });

  it("a failed strict publication stays publication-pending; the unchanged command publishes it without validating again", async () => {
    const archive = join(tmp.dir, "archive");
    await writeFile(archive, "a file where the archive directory should be: every upload fails");
    const opts = run("publication", {
      steps: 4,
      saveEvery: 0,
      validateEvery: 4,
      config: {
        validation: { save_checkpoint: true },
        upload: { enabled: true, bucket: `file://${archive}` },
      },
    });
    const failed = await runTrainer(opts);
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).toContain("MANAGER_PUBLICATION_FAILED");
    const [attemptDir] = await attemptDirs(opts.outputRoot);
    if (attemptDir === undefined) throw new Error("the failed run created no attempt");
    const iterDir = join(attemptDir, "checkpoints", "iter_000000004");
    expect(await validationState(iterDir)).toBe("publication_pending");
    expect((await checkLatestPointer(attemptDir))?.iteration).toBe(4);

    await rm(archive);
    await mkdir(archive);
    const rerun = await runTrainer(opts);
    expect(rerun.code, rerun.stderr.slice(-3000)).toBe(0);
    const result = await readResult(opts.result);
    expect(result.resumed_from).toBe(iterDir);
    expect(result.validations).toEqual([]);
    expect(rerun.stderr).toContain("published the validated step 4 on resume");
    expect(await validationState(iterDir)).toBe("published");
    expect(JSON.parse(await readFile(join(iterDir, ".uploaded"), "utf8"))).toBeTypeOf("object");
  });
});
