// @module-tag torch
// @module-tag crash
// SIGKILL `ckpt materialize-hf` (the real CLI, a child process) at seeded random instants and
// prove after every kill:
// - fresh rounds (no output yet): <out> is absent, or complete and marked for the request;
// - replace rounds (--force over another source's output): <out> is byte-identical to the old
//   output, or complete and marked for the new source, or — between the swap's two renames —
//   absent with <out>.previous byte-identical to the old output (the next run recovers it);
//   never neither;
// - files planted beside the output by someone else are untouched;
// and after each round a re-run completes and leaves exactly the new output (no .tmp, .previous
// or lock). Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { cp, mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { checkHfDirectory } from "@ckpt/hf-conversion";
import { hashFile, MATERIALIZED_MARKER } from "@ckpt/manifest";
import {
  makeHfFixture,
  makeModelArtifact,
  makeTempDir,
  materializeHfArgs,
  TORCH_FIXTURE_TIMEOUT_MS,
} from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertForeignIntact, plantForeign, snapshotTree } from "../helpers/artifact.js";
import { cli, crashBudgetMs, crashKills, crashSeed, runCrashSuite, runNode } from "../helpers/crash.js";

const seed = crashSeed();
const kills = crashKills(100);
// About 40 MB of bf16: enough work after start-up for the kills to land in every stage.
const SIZE = ["--layers", "4", "--hidden", "512", "--intermediate", "2048", "--vocab", "4096"];

let tmp: { dir: string; cleanup: () => Promise<void> };
let base = "";
let sourceA = "";
let sourceB = "";
let shaOf: Map<string, string>;
let oldTree = "";
let oldSnapshot: Map<string, string>;

beforeAll(async () => {
  tmp = await makeTempDir("ckpt-crash-materialize-");
  const fixture = await makeHfFixture(join(tmp.dir, "fx"), "dense", 2, 81, SIZE);
  base = fixture.base;
  sourceA = await makeModelArtifact(join(tmp.dir, "a"), fixture.expert(0));
  sourceB = await makeModelArtifact(join(tmp.dir, "b"), fixture.expert(1));
  shaOf = new Map([
    [sourceA, (await hashFile(join(sourceA, "model.pt"))).sha256],
    [sourceB, (await hashFile(join(sourceB, "model.pt"))).sha256],
  ]);
  // The output a replace round starts from: source A, built once, copied per round.
  oldTree = join(tmp.dir, "template", "teacher");
  const built = await runNode(cli(materializeArgs(sourceA, oldTree, false)));
  expect(built.code, built.stderr).toBe(0);
  oldSnapshot = await snapshotTree(oldTree);
}, TORCH_FIXTURE_TIMEOUT_MS);
afterAll(() => tmp.cleanup());

function materializeArgs(source: string, out: string, force: boolean): string[] {
  return materializeHfArgs(source, base, out, "--json", ...(force ? ["--force"] : []));
}

/** Throws unless `dir` is a complete output marked for `source`: marker, every inventoried file's digest, layout, config. */
async function assertMarked(dir: string, source: string): Promise<void> {
  const marker = await MATERIALIZED_MARKER.read(join(dir, ".materialized"));
  expect(marker.source.sha256).toBe(shaOf.get(source));
  for (const entry of marker.shards) {
    expect(await hashFile(join(dir, entry.path)), `${entry.path} of ${dir}`).toEqual({
      size: entry.size,
      sha256: entry.sha256,
    });
  }
  const report = await checkHfDirectory(dir);
  expect(report.problems).toEqual([]);
  expect(await readFile(join(dir, "config.json"))).toEqual(await readFile(join(base, "config.json")));
}

describe("ckpt materialize-hf under SIGKILL", () => {
  it(
    `keeps the old output or publishes the new one, never neither, across ${kills} kills (seed ${seed})`,
    async () => {
      let parent = "";
      let foreign = new Map<string, string>();
      const out = () => join(parent, "teacher");
      // Even rounds build a fresh output from A; odd rounds replace A's output with B's under --force.
      const replacing = (round: number) => round % 2 === 1;
      const states: Record<string, number> = {};

      const report = await runCrashSuite({
        seed,
        kills,
        killsPerRound: 8,
        startup: cli(["--version"]),
        command: (round) =>
          cli(materializeArgs(replacing(round) ? sourceB : sourceA, out(), replacing(round))),
        prepare: async (round) => {
          if (parent !== "") await rm(parent, { recursive: true, force: true });
          parent = join(tmp.dir, `round${round}`);
          await mkdir(parent, { recursive: true });
          foreign = await plantForeign(parent, "beside");
          if (replacing(round)) await cp(oldTree, out(), { recursive: true });
        },
        afterKill: async ({ round }) => {
          await assertForeignIntact(parent, foreign);
          const now = await snapshotTree(out());
          const target = replacing(round) ? sourceB : sourceA;
          let label: string;
          if (now.size === 0) {
            // Absent: allowed in a fresh round; in a replace round only between the swap's renames.
            if (replacing(round)) {
              expect(
                await snapshotTree(`${out()}.previous`),
                "neither the old output nor the new one",
              ).toEqual(oldSnapshot);
              label = "between-renames";
            } else {
              label = "absent";
            }
          } else if (replacing(round) && sameTree(now, oldSnapshot)) {
            label = "old";
          } else {
            await assertMarked(out(), target);
            label = "new";
          }
          states[label] = (states[label] ?? 0) + 1;
          return label;
        },
        afterCompletion: async ({ round, result }) => {
          const outcome = JSON.parse(result.stdout) as { ok: boolean; action: string };
          expect(outcome.ok).toBe(true);
          await assertMarked(out(), replacing(round) ? sourceB : sourceA);
          await assertForeignIntact(parent, foreign);
          // Nothing of the staged build is left: no <out>.tmp, <out>.previous, lock or lock temporaries.
          expect((await readdir(parent)).sort()).toEqual([
            "foreign-beside-dir",
            "foreign-beside.bin",
            "teacher",
          ]);
        },
        budgetMs: crashBudgetMs(600_000, kills),
        log: (line) => console.log(line),
      });
      console.log(`materialize crash states: ${JSON.stringify(states)}`);
      expect(report.kills).toBeGreaterThanOrEqual(kills);
      // The suite proved something only if kills found both the old tree and the new one.
      expect(states.old ?? 0).toBeGreaterThan(0);
      expect((states.new ?? 0) + (states.absent ?? 0)).toBeGreaterThan(0);
    },
    crashBudgetMs(660_000, kills),
  );
});

function sameTree(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  return a.size === b.size && [...a].every(([path, digest]) => b.get(path) === digest);
}
