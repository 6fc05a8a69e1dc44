import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { estimateFootprint, parseParamCount } from "../src/estimate/footprint.js";
import { planModelRetention, planOptimizerRetention } from "../src/local/plan.js";
import type { CheckpointInfo } from "../src/local/policies.js";

describe("parseParamCount", () => {
  it("reads suffixed, decimal and scientific counts", () => {
    expect(
      ["7B", "7b", "1.5B", "350M", "70k", "1.2T", "7e9", "7000000000", " 13B "].map(parseParamCount),
    ).toEqual([7e9, 7e9, 1.5e9, 3.5e8, 7e4, 1.2e12, 7e9, 7e9, 13e9]);
  });

  it("refuses what is not a count, with the flag named", () => {
    for (const text of ["", "seven", "7X", "-7B", "0", "2e15", "7 B B"]) {
      expect(() => parseParamCount(text)).toThrow(
        expect.objectContaining({ code: "RETENTION_BAD_ARGUMENT", kind: "input" }),
      );
    }
    expect(() => parseParamCount("7Q")).toThrow(/--params "7Q" is not a parameter count/);
  });
});

describe("estimateFootprint", () => {
  it("7B in bf16 with AdamW: 2 bytes of weights and 8 bytes of fp32 moments per parameter; master weights add 4", () => {
    const plain = estimateFootprint({ params: 7e9 });
    expect(plain).toMatchObject({
      estimate: true,
      components: { model: 14e9, optimizer: 56e9, training_state: 8192 },
      perCheckpoint: 70e9 + 8192,
      artifact: false,
      writtenOverRun: null,
    });
    const mixed = estimateFootprint({ params: 7e9, masterWeights: true, ema: true });
    expect(mixed.components).toMatchObject({ model: 28e9, optimizer: 84e9 });
    expect(mixed.assumptions.join("\n")).toMatch(/fp32 master copy of the weights \(4 bytes per parameter\)/);
    expect(plain.assumptions.join("\n")).toMatch(/no fp32 master copy/);
  });

  it("other optimizers and dtypes: SGD and Lion one state tensor, Adafactor none, fp32 weights 4 bytes, bf16 states 2", () => {
    const opt = (
      optimizer: Parameters<typeof estimateFootprint>[0]["optimizer"],
      stateDtype?: "fp32" | "bf16",
    ) =>
      estimateFootprint({ params: 1e9, optimizer, ...(stateDtype ? { stateDtype } : {}) }).components
        .optimizer;
    expect([opt("sgd"), opt("lion"), opt("adafactor"), opt("adamw", "bf16")]).toEqual([4e9, 4e9, 0, 4e9]);
    expect(estimateFootprint({ params: 1e9, dtype: "fp32" }).components.model).toBe(4e9);
  });

  it("per retention setting: the requested one first, then keep-everything and the local default", () => {
    const e = estimateFootprint({
      params: 1e9,
      keepOptimLast: 2,
      keepModelLast: 3,
      iterations: 10,
      trainingStateBytes: 0,
    });
    // model 2e9, optimizer 8e9 per checkpoint.
    expect(e.retention).toEqual([
      {
        keepOptimLast: 2,
        keepModelLast: 3,
        checkpoints: 3,
        withOptimizer: 2,
        bytesAfterSave: 3 * 2e9 + 2 * 8e9,
        peakBytes: 3 * 2e9 + 2 * 8e9 + 10e9,
        growthPerSave: 0,
      },
      {
        keepOptimLast: 0,
        keepModelLast: 0,
        checkpoints: 10,
        withOptimizer: 10,
        bytesAfterSave: 100e9,
        peakBytes: 100e9,
        growthPerSave: 10e9,
      },
      {
        keepOptimLast: 1,
        keepModelLast: 0,
        checkpoints: 10,
        withOptimizer: 1,
        bytesAfterSave: 20e9 + 8e9,
        peakBytes: 18e9 + 8e9 + 10e9,
        growthPerSave: 2e9,
      },
    ]);
    expect(e.writtenOverRun).toBe(100e9);
  });

  it("without a run length, settings that keep everything are unbounded and say how fast they grow", () => {
    const e = estimateFootprint({ params: 1e9, trainingStateBytes: 0 });
    expect(
      e.retention.map((r) => [r.keepOptimLast, r.keepModelLast, r.bytesAfterSave, r.growthPerSave]),
    ).toEqual([
      [1, 0, null, 2e9],
      [0, 0, null, 10e9],
    ]);
    const bounded = estimateFootprint({ params: 1e9, keepModelLast: 2, trainingStateBytes: 0 });
    expect(bounded.retention[0]).toMatchObject({
      checkpoints: 2,
      withOptimizer: 1,
      bytesAfterSave: 12e9,
      peakBytes: 22e9,
    });
  });

  it("a partial plan is an artifact: outside retention, every save stays", () => {
    const e = estimateFootprint({ params: 1e9, components: ["model"], iterations: 5, keepModelLast: 1 });
    expect(e).toMatchObject({ artifact: true, components: { model: 2e9 }, perCheckpoint: 2e9 });
    // optim, the optimizer's file name, is read as optimizer.
    const optim = estimateFootprint({ params: 1e9, components: ["optim" as never], iterations: 5 });
    expect(Object.keys(optim.components)).toEqual(["optimizer"]);
    expect(e.retention).toEqual([expect.objectContaining({ checkpoints: 5, bytesAfterSave: 10e9 })]);
    expect(e.assumptions.join("\n")).toMatch(/retention never removes/);
  });

  it("refuses bad input with RETENTION_BAD_ARGUMENT", () => {
    const bad = [
      { params: 0 },
      { params: 1.5 },
      { params: 1e9, dtype: "int4" as never },
      { params: 1e9, optimizer: "shampoo" as never },
      { params: 1e9, components: [] },
      { params: 1e9, components: ["model", "model"] as never },
      { params: 1e9, components: ["weights"] as never },
      { params: 1e9, keepOptimLast: -1 },
      { params: 1e9, iterations: 0 },
    ];
    for (const input of bad) {
      expect(() => estimateFootprint(input)).toThrow(
        expect.objectContaining({ code: "RETENTION_BAD_ARGUMENT" }),
      );
    }
  });

  it("agrees with the real retention planners over simulated saves (any keep_optim_last, keep_model_last, run length)", () => {
    // One fp8 parameter and 2 bytes of training state: 3 bytes per directory; AdamW with bf16
    // moments and an fp32 master copy: 8 bytes of optimizer state. Distinct sizes, so counts show.
    const perDir = 3;
    const optimizer = 8;
    fc.assert(
      fc.property(fc.nat(5), fc.nat(5), fc.integer({ min: 1, max: 14 }), (ko, km, n) => {
        let disk: CheckpointInfo[] = [];
        let peak = 0;
        const bytes = (infos: readonly CheckpointInfo[]) =>
          infos.reduce((sum, c) => sum + perDir + (c.hasOptimizer ? optimizer : 0), 0);
        for (let save = 1; save <= n; save++) {
          disk = [
            ...disk.map((c) => ({ ...c, isLatest: false })),
            {
              iteration: save * 100,
              dir: `iter_${save}`,
              hasOptimizer: true,
              uploaded: "none" as const,
              isLatest: true,
            },
          ];
          peak = Math.max(peak, bytes(disk));
          const stripped = new Set(
            planOptimizerRetention(disk, { keepLast: ko, requireUploaded: false }).remove.map((r) => r.dir),
          );
          disk = disk.map((c) => (stripped.has(c.dir) ? { ...c, hasOptimizer: false } : c));
          const removed = new Set(
            planModelRetention(disk, { keepLast: km, requireUploaded: false }).remove.map((r) => r.dir),
          );
          disk = disk.filter((c) => !removed.has(c.dir));
        }
        const e = estimateFootprint({
          params: 1,
          dtype: "fp8",
          optimizer: "adamw",
          stateDtype: "bf16",
          masterWeights: true,
          trainingStateBytes: 2,
          keepOptimLast: ko,
          keepModelLast: km,
          iterations: n,
        });
        expect(e.perCheckpoint).toBe(perDir + optimizer);
        expect(e.retention[0]).toMatchObject({
          keepOptimLast: ko,
          keepModelLast: km,
          checkpoints: disk.length,
          withOptimizer: disk.filter((c) => c.hasOptimizer).length,
          bytesAfterSave: bytes(disk),
          peakBytes: peak,
        });
      }),
      { numRuns: 300 },
    );
  });
});
