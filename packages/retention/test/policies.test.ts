import { describe, expect, it } from "vitest";
import {
  allOf,
  anyOf,
  bestN,
  type CheckpointInfo,
  everyNSteps,
  keepAll,
  latestN,
  type RetentionPolicy,
} from "../src/index.js";

function info(iteration: number, metrics?: Record<string, number>): CheckpointInfo {
  return {
    iteration,
    dir: `/run/checkpoints/iter_${String(iteration).padStart(9, "0")}`,
    hasOptimizer: true,
    uploaded: "none",
    ...(metrics === undefined ? {} : { metrics }),
  };
}

/** Iterations deliberately out of order: policies answer in the order given. */
const infos = [
  info(300, { loss: 0.5 }),
  info(100, { loss: 0.2 }),
  info(500),
  info(200, { loss: 0.2 }),
  info(400, { loss: 0.9, acc: 0.7 }),
];

/** Which iterations a policy keeps, in input order. */
function kept(p: RetentionPolicy, input: readonly CheckpointInfo[] = infos): number[] {
  const flags = p(input);
  expect(flags).toHaveLength(input.length);
  return input.filter((_, i) => flags[i]).map((x) => x.iteration);
}

describe("retention policies", () => {
  it.each<[string, RetentionPolicy, number[]]>([
    ["keepAll (the default) keeps every checkpoint", keepAll(), [300, 100, 500, 200, 400]],
    ["latestN keeps the n highest iterations", latestN(2), [500, 400]],
    ["latestN(0) keeps none", latestN(0), []],
    ["latestN beyond the count keeps all", latestN(9), [300, 100, 500, 200, 400]],
    ["everyNSteps keeps multiples of n", everyNSteps(200), [200, 400]],
    ["everyNSteps(1) keeps all", everyNSteps(1), [300, 100, 500, 200, 400]],
    [
      "bestN min keeps the lowest metric; ties go to the newer iteration",
      bestN({ metric: "loss", n: 1, mode: "min" }),
      [200],
    ],
    ["bestN min with n=2 takes both tied values", bestN({ metric: "loss", n: 2, mode: "min" }), [100, 200]],
    ["bestN max keeps the highest metric", bestN({ metric: "loss", n: 1, mode: "max" }), [400]],
    [
      "bestN never counts a checkpoint without the metric as best",
      bestN({ metric: "acc", n: 3, mode: "max" }),
      [400],
    ],
    ["bestN of a metric nobody recorded keeps none", bestN({ metric: "bleu", n: 2, mode: "max" }), []],
    ["anyOf keeps what any policy keeps", anyOf(latestN(1), everyNSteps(200)), [500, 200, 400]],
    ["allOf keeps what every policy keeps", allOf(latestN(3), everyNSteps(200)), [400]],
    [
      "anyOf composes with bestN (the conventions' example)",
      anyOf(latestN(1), bestN({ metric: "loss", n: 1, mode: "min" })),
      [500, 200],
    ],
  ])("%s", (_name, p, expected) => {
    expect(kept(p)).toEqual(expected);
  });

  it("bestN ignores non-finite metric values", () => {
    const input = [
      info(1, { loss: Number.NaN }),
      info(2, { loss: Number.POSITIVE_INFINITY }),
      info(3, { loss: 5 }),
    ];
    expect(kept(bestN({ metric: "loss", n: 3, mode: "min" }), input)).toEqual([3]);
  });

  it("every policy answers an empty list with an empty list", () => {
    for (const p of [keepAll(), latestN(2), everyNSteps(3), bestN({ metric: "loss", n: 1, mode: "min" })]) {
      expect(p([])).toEqual([]);
    }
  });

  it("labels say what a policy keeps", () => {
    expect(anyOf(latestN(5), everyNSteps(1000), bestN({ metric: "loss", n: 3, mode: "min" })).label).toBe(
      "anyOf(latest 5, every 1000 steps, best 3 by loss (min))",
    );
  });

  it.each<[string, () => unknown]>([
    ["latestN(-1)", () => latestN(-1)],
    ["latestN(1.5)", () => latestN(1.5)],
    ["everyNSteps(0)", () => everyNSteps(0)],
    ["bestN with n=-1", () => bestN({ metric: "loss", n: -1, mode: "min" })],
    ["bestN without a metric", () => bestN({ metric: "", n: 1, mode: "min" })],
    ["bestN with a bad mode", () => bestN({ metric: "loss", n: 1, mode: "lowest" as "min" })],
    ["anyOf()", () => anyOf()],
    ["allOf()", () => allOf()],
  ])("refuses %s as bad input", (_name, make) => {
    expect(make).toThrow(expect.objectContaining({ code: "RETENTION_BAD_ARGUMENT", kind: "input" }));
  });

  it("a composed custom policy answering the wrong number of flags is refused", () => {
    const broken = Object.assign(() => [true], { label: "broken" }) as RetentionPolicy;
    expect(() => anyOf(broken)(infos)).toThrow(
      expect.objectContaining({
        code: "RETENTION_POLICY_RESULT",
        message: expect.stringContaining("broken"),
      }),
    );
  });
});
