// @module-tag crash
// The crash harness itself: kills land inside the command's run, a torn write is caught (the
// harness can fail), a replayed seed aims at the same instants, and a hang is reported.
import { readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { CrashInvariantError, type NodeCommand, runCrashSuite, runNode } from "../helpers/crash.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Writes `marker` = 8 chunks of 4 KiB, 15 ms apart; atomically (temp + rename) or in place. */
const WRITER = `
const fs = require("node:fs");
const [dir, mode] = process.argv.slice(1);
const target = dir + "/marker";
const out = mode === "atomic" ? target + ".tmp" : target;
const fd = fs.openSync(out, "w");
let i = 0;
const step = () => {
  if (i++ < 8) { fs.writeSync(fd, Buffer.alloc(4096, 97)); setTimeout(step, 15); return; }
  fs.fsyncSync(fd); fs.closeSync(fd);
  if (mode === "atomic") fs.renameSync(out, target);
};
step();
`;

async function markerState(dir: string): Promise<string> {
  const size = await stat(join(dir, "marker")).then(
    (s) => s.size,
    () => undefined,
  );
  if (size === undefined) return "absent";
  if (size !== 8 * 4096) throw new Error(`torn marker: ${size} bytes`);
  const bytes = await readFile(join(dir, "marker"));
  if (!bytes.every((b) => b === 97)) throw new Error("marker holds foreign bytes");
  return "complete";
}

async function suite(mode: "atomic" | "torn", seed: number, kills: number) {
  const { dir, cleanup } = await makeTempDir("ckpt-crash-self-");
  cleanups.push(cleanup);
  const command: NodeCommand = { args: ["-e", WRITER, dir, mode] };
  const fractions = new Map<number, number>();
  const report = await runCrashSuite({
    seed,
    kills,
    killsPerRound: 2,
    calibrationRuns: 1,
    budgetMs: 60_000,
    command: () => command,
    prepare: async () => {
      await rm(join(dir, "marker"), { force: true });
      await rm(join(dir, "marker.tmp"), { force: true });
    },
    onAttempt: ({ attempt, fraction }) => {
      fractions.set(attempt, fraction);
    },
    afterKill: async () => markerState(dir),
    afterCompletion: async () => {
      expect(await markerState(dir)).toBe("complete");
    },
  });
  return { report, fractions };
}

describe("crash harness", () => {
  it("proves an atomic writer: every kill leaves no marker or a complete one", async () => {
    const { report } = await suite("atomic", 1234, 12);
    expect(report.kills).toBe(12);
    expect(report.completions).toBeGreaterThanOrEqual(6);
    expect(Object.keys(report.states).every((s) => s === "absent" || s === "complete")).toBe(true);
  });

  it("catches a torn writer and names the seed to replay it", async () => {
    const error = await suite("torn", 99, 20).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CrashInvariantError);
    expect(String((error as Error).message)).toMatch(/torn marker/);
    expect(String((error as Error).message)).toContain("CKPT_CRASH_SEED=99");
  });

  it("aims a replayed seed at the same fractions of the run", async () => {
    const a = await suite("atomic", 777, 5);
    const b = await suite("atomic", 777, 5);
    const c = await suite("atomic", 778, 5);
    // The n-th attempt of a seed aims at the same fraction of the run, killed or not.
    const first = (m: Map<number, number>) => [1, 2, 3, 4, 5].map((n) => m.get(n));
    expect(first(a.fractions).every((f) => f !== undefined)).toBe(true);
    expect(first(a.fractions)).toEqual(first(b.fractions));
    expect(first(a.fractions)).not.toEqual(first(c.fractions));
  });

  it("re-times the window when a machine slows down after calibration", async () => {
    // Calibration runs start writing at once; every later run first idles 600 ms, so a window
    // measured at calibration ends before any of their work begins.
    const slowedDown = async (untouched: boolean) => {
      const { dir, cleanup } = await makeTempDir("ckpt-crash-slow-");
      cleanups.push(cleanup);
      const script = `const [dir, delay] = process.argv.slice(1);
const fs = require("node:fs");
setTimeout(() => {
  const fd = fs.openSync(dir + "/marker.tmp", "w");
  let i = 0;
  const step = () => {
    if (i++ < 8) { fs.writeSync(fd, Buffer.alloc(4096, 97)); setTimeout(step, 40); return; }
    fs.closeSync(fd); fs.renameSync(dir + "/marker.tmp", dir + "/marker");
  };
  step();
}, Number(delay));`;
      const state = async () => {
        const tmp = await stat(join(dir, "marker.tmp")).then(
          () => true,
          () => false,
        );
        return tmp ? "writing" : markerState(dir);
      };
      return runCrashSuite({
        seed: 4242,
        kills: 15,
        killsPerRound: 3,
        calibrationRuns: 1,
        budgetMs: 90_000,
        command: (round) => ({ args: ["-e", script, dir, round < 0 ? "0" : "600"] }),
        prepare: async () => {
          await rm(join(dir, "marker"), { force: true });
          await rm(join(dir, "marker.tmp"), { force: true });
        },
        afterKill: state,
        afterCompletion: async () => {
          expect(await markerState(dir)).toBe("complete");
        },
        ...(untouched ? { untouched: (label: string) => label === "absent" } : {}),
      });
    };
    const fixed = await slowedDown(false);
    expect(fixed.retimedRounds).toBe(0);
    expect(Object.keys(fixed.states)).toEqual(["absent"]);
    const followed = await slowedDown(true);
    expect(followed.retimedRounds).toBeGreaterThanOrEqual(1);
    expect(followed.states.writing ?? 0).toBeGreaterThan(0);
  });

  it("reports a run that overruns its bound as a hang, not a kill", async () => {
    const result = await runNode({ args: ["-e", "setInterval(() => {}, 1000)"] }, { timeoutMs: 300 });
    expect(result.timedOut).toBe(true);
    expect(result.killed).toBe(false);
  });
});
