// @module-tag torch
// @module-tag crash
// SIGKILL `ckpt merge` (the built CLI, a child process) at seeded random instants (10% of the kills
// over the CLI's start-up, 90% over the rest of an uninterrupted run) and prove after every kill:
// - the artifact directory is absent (no earlier output), byte-identical to the earlier output, or
//   the new output complete and marked (byte-identical to an uninterrupted run's), never a mixture;
// - or, inside the swap (between its two renames), the earlier output waits intact beside the
//   directory and the staged new output is complete: the next run finishes the swap;
// - foreign files beside the artifact and the inputs are untouched;
// and after each round a re-run completes with the new output in place and nothing left aside.
// Even rounds merge into nothing (avg → fresh); odd rounds replace a completed merge of another
// request with --force. Inputs are real PyTorch files from tools/fixtures/make_hf_fixtures.py.
// Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { cp, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { mergeExperts } from "@ckpt/merge";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertForeignIntact, plantForeign, snapshotTree } from "../helpers/artifact.js";
import { CLI_BIN, cli, crashBudgetMs, crashKills, crashSeed, runCrashSuite } from "../helpers/crash.js";
import { makeDenseFixture, runProcess } from "./fixtures.js";

const seed = crashSeed();
const kills = crashKills(100);
const ITER = "iter_000000300";

type Snapshot = Map<string, string>;
const same = (a: Snapshot, b: Snapshot) => a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);

describe("ckpt merge under SIGKILL", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let experts: string[];
  let base: string;
  let inputs: Snapshot;
  /** The output of the earlier request (A) and of the request under test (B), from uninterrupted runs. */
  let outputA: Snapshot;
  let outputB: Snapshot;
  let prebuiltA: string;

  const requestA = (out: string) => ({ mode: "avg", experts, out });
  const argsB = (out: string, force: boolean) => [
    "merge",
    "--mode",
    "tv",
    "--lam",
    "0.5",
    "--base",
    base,
    "--experts",
    experts.join(","),
    "--out",
    out,
    "--json",
    ...(force ? ["--force"] : []),
  ];

  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-crash-merge-");
    const fixture = join(tmp.dir, "fixture");
    ({ experts, base } = await makeDenseFixture(fixture, 5, {
      layers: 4,
      hidden: 256,
      intermediate: 512,
      vocab: 1024,
    }));
    inputs = await snapshotTree(fixture);
    prebuiltA = join(tmp.dir, "prebuilt-a", ITER);
    await mergeExperts(requestA(join(prebuiltA, "model.pt")));
    outputA = await snapshotTree(prebuiltA);
    const b = join(tmp.dir, "prebuilt-b", ITER);
    const report = await runProcess(process.execPath, [CLI_BIN, ...argsB(join(b, "model.pt"), false)]);
    expect(JSON.parse(report.stdout).status).toBe("merged");
    outputB = await snapshotTree(b);
    expect(same(outputA, outputB)).toBe(false);
  }, 180_000);
  afterAll(async () => {
    await tmp.cleanup();
  });

  it(
    `leaves the old output or the new one across ${kills} kills (seed ${seed})`,
    async () => {
      let root = "";
      let foreign: Snapshot = new Map();
      const parent = () => join(root, "checkpoint_artifacts");
      const iterDir = () => join(parent(), ITER);
      const replacing = (round: number) => Math.abs(round) % 2 === 1;

      const report = await runCrashSuite({
        seed,
        kills,
        killsPerRound: 8,
        startup: cli(["--version"]),
        command: (round) => cli(argsB(join(iterDir(), "model.pt"), replacing(round))),
        prepare: async (round) => {
          if (root !== "") await rm(root, { recursive: true, force: true });
          root = join(tmp.dir, `round${round}`);
          await mkdir(parent(), { recursive: true });
          // Another artifact and stray files beside the output: never the merge's to touch.
          await mkdir(join(parent(), "iter_000000299"));
          await plantForeign(join(parent(), "iter_000000299"), "other");
          foreign = await plantForeign(parent(), "beside");
          if (replacing(round)) await cp(prebuiltA, iterDir(), { recursive: true });
        },
        afterKill: async ({ round }) => {
          await assertForeignIntact(parent(), foreign);
          expect(same(await snapshotTree(join(tmp.dir, "fixture")), inputs)).toBe(true);
          const now = await snapshotTree(iterDir());
          const previous = await snapshotTree(join(parent(), `.${ITER}.merge-previous`));
          const staging = await snapshotTree(join(parent(), `.${ITER}.merge-staging`));
          const olds = replacing(round) ? [outputA, outputB] : [outputB];
          if (now.size > 0) {
            if (same(now, outputB)) return staging.size > 0 ? "new+staging" : "new";
            if (olds.some((o) => same(now, o))) return staging.size > 0 ? "old+staging" : "old";
            throw new Error(
              `${iterDir()} is neither the earlier output nor the new one: ${[...now.keys()].join(", ")}`,
            );
          }
          if (previous.size > 0) {
            // Between the swap's renames: the earlier output aside, intact; the staged one complete.
            if (!olds.some((o) => same(previous, o)))
              throw new Error("the output set aside by the swap was changed");
            if (!same(staging, outputB))
              throw new Error("the swap moved aside the output before the new one was complete");
            return "between-renames";
          }
          if (replacing(round)) throw new Error(`the earlier output at ${iterDir()} is gone`);
          return staging.size > 0 ? "absent+staging" : "absent";
        },
        afterCompletion: async ({ round, previous, result }) => {
          const out = JSON.parse(result.stdout) as { ok: boolean; status: string };
          expect(out.ok).toBe(true);
          if (previous === "completed" && !replacing(round)) expect(out.status).toBe("skipped");
          expect(same(await snapshotTree(iterDir()), outputB)).toBe(true);
          expect((await snapshotTree(join(parent(), `.${ITER}.merge-previous`))).size).toBe(0);
          expect((await snapshotTree(join(parent(), `.${ITER}.merge-staging`))).size).toBe(0);
          await assertForeignIntact(parent(), foreign);
        },
        budgetMs: crashBudgetMs(540_000, kills),
        runTimeoutMs: 60_000,
        log: (line) => console.log(line),
      });
      console.log(`merge crash states: ${JSON.stringify(report.states)}`);
      expect(report.kills).toBeGreaterThanOrEqual(kills);
      // The kills must have landed inside the work too, or the suite proved little.
      const inside = Object.entries(report.states)
        .filter(([label]) => label !== "absent" && label !== "old")
        .reduce((sum, [, n]) => sum + n, 0);
      expect(inside).toBeGreaterThan(0);
    },
    crashBudgetMs(600_000, kills),
  );
});
