// @module-tag torch
// @module-tag crash
// SIGKILL the example PyTorch trainer, and separately its ckpt-trainer sidecar, at seeded random
// instants (most of them after the interpreter's start-up, many while a save is being written),
// then rerun the unchanged command (resume=auto). After every kill, latest_checkpoint.txt is
// absent or names a checkpoint whose every component file opens and reads back in full; every run
// to completion ends at the last step with weights bit-identical to an uninterrupted run, in the
// one run attempt the first launch minted.
// Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { childPids, type KillVictim, runCrashSuite, crashKills, crashSeed } from "../helpers/crash.js";
import {
  attemptDirs,
  checkLatestPointer,
  iterationDirs,
  readResult,
  type TrainOptions,
  trainCommand,
  uninterruptedDigest,
} from "./helpers.js";

const seed = crashSeed();
/** The minimum per victim; each cycle costs a PyTorch start-up (~2-3 s), so CI stays at it. */
const kills = crashKills(30, { CKPT_CRASH_KILLS: process.env.CKPT_CRASH_KILLS ?? "30" });

const STEPS = 16;
const SAVE_EVERY = 4;

/** A process that is gone or a zombie no longer writes. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

async function waitGone(pids: readonly number[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (pids.some(alive)) {
    if (Date.now() > deadline)
      throw new Error(`processes ${pids.filter(alive).join(", ")} outlived the trainer`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("the example trainer under SIGKILL (real PyTorch)", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let reference: string;
  const options = (root: string): TrainOptions => ({
    outputRoot: root,
    steps: STEPS,
    saveEvery: SAVE_EVERY,
    result: join(root, "result.json"),
    stepMs: 20,
    // Each component write is followed by a pause: the saves then fill about half of the run after
    // the sidecar's start, so a good share of the kills lands mid-save.
    writePauseMs: 100,
  });

  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-crash-trainer-");
    reference = await uninterruptedDigest(options(join(tmp.dir, "reference")));
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  async function suite(name: string, victim: "trainer" | "sidecar") {
    let root = "";
    /** Sidecars alive at the kill instant: an orphan must be gone before anything is checked. */
    let orphans: number[] = [];
    const states: Record<string, number> = {};
    /** The run reached its last step, in the one attempt, with the uninterrupted run's weights. */
    const expectFinished = async (stderr: string) => {
      const out = await readResult(join(root, "result.json"));
      expect(out.step).toBe(STEPS);
      expect(out.stopped).toBeNull();
      expect(out.digest, stderr.slice(-2000)).toBe(reference);
      const attempts = await attemptDirs(root);
      expect(attempts).toEqual([out.attempt_dir]);
      expect((await checkLatestPointer(attempts[0]!))?.iteration).toBe(STEPS);
    };
    const pickVictim: KillVictim = (trainerPid) => {
      orphans = childPids(trainerPid);
      if (victim === "trainer") return trainerPid;
      return orphans[0]; // undefined before the trainer has spawned its sidecar: no kill
    };
    const report = await runCrashSuite({
      seed,
      kills,
      killsPerRound: 8,
      calibrationRuns: 1,
      // Kills land after the interpreter has imported torch (seconds, and very variable on a busy
      // machine): from the sidecar's start to the trainer's exit, where the checkpoint work is.
      armOn: /starting the checkpoint sidecar/,
      victim: pickVictim,
      command: () => trainCommand(options(root)),
      prepare: async (round) => {
        if (root !== "") await rm(root, { recursive: true, force: true });
        root = join(tmp.dir, `${name}-round${round}`);
        await mkdir(root, { recursive: true });
      },
      afterKill: async ({ result }) => {
        await waitGone(orphans);
        if (victim === "sidecar" && result.code === 0) {
          // The sidecar died after answering finalize, while exiting: the run had finished.
          await expectFinished(result.stderr);
          return count(states, "after-finalize");
        }
        // Without its sidecar the trainer fails loudly; it never trains on unsaved.
        if (victim === "sidecar") expect(result.code).not.toBe(0);
        const attempts = await attemptDirs(root);
        expect(attempts.length).toBeLessThanOrEqual(1);
        if (attempts.length === 0) return count(states, "before-attempt");
        const latest = await checkLatestPointer(attempts[0]!);
        const newer = [...(await iterationDirs(attempts[0]!)).keys()].filter(
          (i) => i > (latest?.iteration ?? -1),
        );
        return count(states, newer.length > 0 ? "mid-save" : latest === undefined ? "no-pointer" : "pointer");
      },
      afterCompletion: async ({ result }) => {
        await waitGone(orphans);
        await expectFinished(result.stderr);
      },
      budgetMs: 900_000,
      runTimeoutMs: 120_000,
      log: (line) => console.log(line),
    });
    console.log(`${name} crash states: ${JSON.stringify(states)}`);
    expect(report.kills).toBeGreaterThanOrEqual(kills);
    // The suite proves little unless kills landed while a save was being written.
    expect(states["mid-save"] ?? 0).toBeGreaterThan(0);
    expect(existsSync(root)).toBe(true);
  }

  it(`SIGKILL of the trainer: ${kills} kills (seed ${seed})`, { timeout: 1_000_000 }, async () => {
    await suite("trainer", "trainer");
  });

  it(`SIGKILL of the sidecar: ${kills} kills (seed ${seed})`, { timeout: 1_000_000 }, async () => {
    await suite("sidecar", "sidecar");
  });
});

function count(states: Record<string, number>, label: string): string {
  states[label] = (states[label] ?? 0) + 1;
  return label;
}
