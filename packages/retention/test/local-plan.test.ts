import { describe, expect, it } from "vitest";
import {
  type CheckpointInfo,
  everyNSteps,
  type LocalRetentionOptions,
  planModelRetention,
  planOptimizerRetention,
  type RetentionPlan,
  type UploadState,
} from "../src/index.js";

function info(iteration: number, more: Partial<CheckpointInfo> = {}): CheckpointInfo {
  return {
    iteration,
    dir: `/run/checkpoints/iter_${String(iteration).padStart(9, "0")}`,
    hasOptimizer: true,
    uploaded: "receipt",
    ...more,
  };
}

function removed(plan: RetentionPlan): number[] {
  return plan.remove.map((r) => r.iteration);
}

function reasons(plan: RetentionPlan): Record<number, string> {
  return Object.fromEntries(plan.keep.map((k) => [k.iteration, k.reason]));
}

const four = [info(400), info(100), info(300), info(200)];

describe.each([
  ["planOptimizerRetention", planOptimizerRetention, "optimizer"],
  ["planModelRetention", planModelRetention, "iteration"],
] as const)("%s", (_name, planner, target) => {
  const opts = (o: Partial<LocalRetentionOptions> = {}): LocalRetentionOptions => ({
    keepLast: 1,
    requireUploaded: false,
    ...o,
  });

  it("rule keep-last: removes all but the newest N, oldest first", () => {
    const plan = planner(four, opts({ keepLast: 2 }));
    expect(plan.target).toBe(target);
    expect(removed(plan)).toEqual([100, 200]);
    expect(plan.remove.every((r) => r.target === target)).toBe(true);
    expect(reasons(plan)).toEqual({ 300: "within_keep_last", 400: "within_keep_last" });
  });

  it("rule keep-last-zero: keepLast=0 keeps everything", () => {
    const plan = planner(four, opts({ keepLast: 0 }));
    expect(removed(plan)).toEqual([]);
    expect(Object.values(reasons(plan))).toEqual(["keep_all", "keep_all", "keep_all", "keep_all"]);
  });

  it("rule keep-fn: the policy keeps what it names beyond the newest N", () => {
    const plan = planner(four, opts({ keepFn: everyNSteps(200) }));
    expect(removed(plan)).toEqual([100, 300]);
    expect(reasons(plan)[200]).toBe("kept_by_policy");
  });

  it.each<[UploadState, boolean]>([
    ["none", false],
    ["legacy", true],
    ["receipt", true],
  ])(
    "rule upload-gate: with upload on, a candidate whose receipt is %s is removable=%s",
    (uploaded, removable) => {
      const plan = planner([info(100, { uploaded }), info(200)], opts({ requireUploaded: true }));
      expect(removed(plan)).toEqual(removable ? [100] : []);
      if (!removable) expect(reasons(plan)[100]).toBe("not_uploaded");
    },
  );

  it("rule upload-gate-per-candidate: a later successful upload does not release an earlier failed one", () => {
    const infos = [
      info(100, { uploaded: "none" }),
      info(200, { uploaded: "receipt" }),
      info(300, { uploaded: "receipt" }),
    ];
    const plan = planner(infos, opts({ requireUploaded: true }));
    expect(removed(plan)).toEqual([200]);
    expect(reasons(plan)[100]).toBe("not_uploaded");
  });

  it("rule upload-off: without upload, not-uploaded checkpoints are removable", () => {
    const plan = planner([info(100, { uploaded: "none" }), info(200)], opts());
    expect(removed(plan)).toEqual([100]);
  });

  it("rule latest-pointer: the iteration latest_checkpoint.txt names is never removed", () => {
    const plan = planner([info(100), info(200, { isLatest: true }), info(300)], opts());
    expect(removed(plan)).toEqual([100]);
    expect(reasons(plan)[200]).toBe("latest_pointer");
  });

  it("rule any-digit-count: iterations order numerically, not by name", () => {
    const infos = [
      info(99, { dir: "/run/checkpoints/iter_99" }),
      info(100, { dir: "/run/checkpoints/iter_000100" }),
    ];
    expect(removed(planner(infos, opts()))).toEqual([99]);
  });

  it("refuses a negative or fractional keepLast and a missing requireUploaded", () => {
    for (const keepLast of [-1, 0.5, Number.NaN]) {
      expect(() => planner(four, opts({ keepLast }))).toThrow(
        expect.objectContaining({
          code: "RETENTION_BAD_ARGUMENT",
          message: expect.stringContaining("keepLast"),
        }),
      );
    }
    expect(() => planner(four, { keepLast: 1 } as LocalRetentionOptions)).toThrow(
      expect.objectContaining({
        code: "RETENTION_BAD_ARGUMENT",
        message: expect.stringContaining("requireUploaded"),
      }),
    );
  });

  it("plans nothing for no checkpoints", () => {
    expect(planner([], opts())).toEqual({ target, remove: [], keep: [] });
  });
});

describe("planOptimizerRetention only", () => {
  it("rule weights-stay: the plan targets the optimizer state, never the iteration", () => {
    const plan = planOptimizerRetention(four, { keepLast: 1, requireUploaded: false });
    expect(plan.remove.map((r) => r.target)).toEqual(["optimizer", "optimizer", "optimizer"]);
  });

  it("rule count-with-optimizer: the newest N are counted among directories that still hold optimizer state", () => {
    const infos = [info(100), info(200), info(300, { hasOptimizer: false })];
    const plan = planOptimizerRetention(infos, { keepLast: 1, requireUploaded: false });
    expect(removed(plan)).toEqual([100]);
    expect(reasons(plan)).toEqual({ 200: "within_keep_last", 300: "no_optimizer" });
  });
});

describe("planModelRetention only", () => {
  it("rule whole-dirs: counts every iteration directory, with or without optimizer state", () => {
    const infos = [info(100), info(200), info(300, { hasOptimizer: false })];
    expect(removed(planModelRetention(infos, { keepLast: 1, requireUploaded: false }))).toEqual([100, 200]);
  });
});
