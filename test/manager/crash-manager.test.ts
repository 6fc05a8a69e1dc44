// @module-tag crash
// SIGKILL a child process that saves in a loop through the built @ckpt/trainer-checkpoint-manager
// (test/manager/fixtures/save-loop.mjs) at seeded random instants, and prove after every kill:
// - latest_checkpoint.txt names a complete checkpoint (every component whole, with the bytes of
//   its step, and its description) or does not exist;
// - a committed artifact is never rewritten (manifest and payload bytes as first seen) and its
//   payloads match its manifest;
// - the next run resumes where the rules say: the checkpoint the pointer names (retrying an open
//   validation transaction), a fresh start, or the refusal to cold-restart over an artifact.
// Rounds alternate between full checkpoints (save_async, validation transactions, retention) and
// partial artifacts. A long local run can pin the package with CKPT_MANAGER_BUNDLE (see the child).
// Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { createHash } from "node:crypto";
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crashBudgetMs, crashKills, crashSeed, REPO_ROOT, runCrashSuite } from "../helpers/crash.js";
import { componentTable, writeComponentTable } from "./fixtures/component-bytes.mjs";

const seed = crashSeed();
const kills = crashKills(100);
const SCRIPT = join(REPO_ROOT, "test", "manager", "fixtures", "save-loop.mjs");
const STEPS = { full: 20, artifact: 14 } as const;
type Mode = keyof typeof STEPS;

let bytesOf: (name: string, step: number) => Buffer;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function readOptional(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

async function attempts(outputRoot: string): Promise<string[]> {
  const runDir = join(outputRoot, "proj", "grp", "run");
  const names = await readdir(runDir).catch(() => [] as string[]);
  return names
    .filter((n) => /^[0-9]{14}$/.test(n))
    .sort()
    .map((n) => join(runDir, n));
}

/** What the next run must print first: its resume decision, or the refusal. */
type Expected =
  | { event: "resume"; kind: "fresh" }
  | { event: "resume"; kind: "checkpoint"; iteration: number; validation: string | undefined }
  | { event: "refused" };

/** Checks an attempt's pointer; returns the iteration it names and that checkpoint's open validation state. */
async function checkPointer(
  attemptDir: string,
): Promise<{ iteration: number; validation: string | undefined } | undefined> {
  const root = join(attemptDir, "checkpoints");
  const pointer = await readOptional(join(root, "latest_checkpoint.txt"));
  if (pointer === undefined) return undefined;
  const match = /^iter_([0-9]{9})$/.exec(pointer.toString());
  if (!match) throw new Error(`latest_checkpoint.txt holds ${JSON.stringify(pointer.toString())}`);
  const iteration = Number(match[1]);
  const dir = join(root, pointer.toString());
  for (const name of ["model", "optim", "trainer"]) {
    const bytes = await readOptional(join(dir, `${name}.pt`));
    if (bytes === undefined) throw new Error(`the pointer names ${dir}, which lacks ${name}.pt`);
    if (!bytes.equals(bytesOf(name, iteration)))
      throw new Error(`the pointer names ${dir}, whose ${name}.pt is torn`);
  }
  const description = JSON.parse((await readFile(join(dir, ".posttrain-checkpoint.json"))).toString()) as {
    iteration: number;
    physical_components: Array<{ name: string; size: number }>;
  };
  expect(description.iteration).toBe(iteration);
  for (const c of description.physical_components) expect(c.size).toBe(bytesOf(c.name, iteration).length);
  const record = await readOptional(join(dir, ".posttrain-validation.json"));
  const state = record === undefined ? undefined : (JSON.parse(record.toString()) as { state: string }).state;
  return { iteration, validation: state === "published" ? undefined : state };
}

/** Checks every committed artifact against its manifest and against what was seen before; records new ones. */
async function checkArtifacts(attemptDir: string, seen: Map<string, string>): Promise<number> {
  const root = join(attemptDir, "checkpoint_artifacts");
  let committed = 0;
  for (const name of await readdir(root).catch(() => [] as string[])) {
    const dir = join(root, name);
    const manifestBytes = await readOptional(join(dir, ".posttrain-checkpoint-artifact.json"));
    if (manifestBytes === undefined) continue; // interrupted: not an artifact yet
    committed++;
    const manifest = JSON.parse(manifestBytes.toString()) as {
      iteration: number;
      physical_components: Array<{ name: string; path: string; size: number; sha256: string }>;
    };
    let fingerprint = sha256(manifestBytes);
    for (const c of manifest.physical_components) {
      const bytes = await readFile(join(dir, c.path));
      if (sha256(bytes) !== c.sha256 || bytes.length !== c.size)
        throw new Error(`${dir}/${c.path} does not match its manifest`);
      if (!bytes.equals(bytesOf(c.name, manifest.iteration)))
        throw new Error(`${dir}/${c.path} holds another step's bytes`);
      fingerprint += sha256(bytes);
    }
    const before = seen.get(dir);
    if (before !== undefined && before !== fingerprint)
      throw new Error(`the committed artifact ${dir} was rewritten`);
    seen.set(dir, fingerprint);
  }
  return committed;
}

describe("trainer checkpoint manager under SIGKILL", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-crash-manager-");
    // Beside every round's output root (tmp.dir/round<N>), where the child trainer reads it.
    const table = join(tmp.dir, "component-bytes");
    await writeComponentTable(table, Math.max(STEPS.full, STEPS.artifact));
    bytesOf = componentTable(table);
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it(
    `keeps the pointer, artifact and resume invariants across ${kills} kills (seed ${seed})`,
    async () => {
      let outputRoot = "";
      let mode: Mode = "full";
      let expected: Expected = { event: "resume", kind: "fresh" };
      const seen = new Map<string, string>();
      const states: Record<string, number> = {};
      const roundDir = (r: number) => join(tmp.dir, `round${r}`);
      let current = Number.NaN;

      /** Inspects what is on disk now and decides what the next run must print first. */
      const inspect = async (): Promise<string> => {
        const all = await attempts(outputRoot);
        let label = "empty";
        for (const attempt of all) {
          const pointer = await checkPointer(attempt);
          const artifacts = await checkArtifacts(attempt, seen);
          if (pointer !== undefined) label = `pointer${pointer.validation ? `+${pointer.validation}` : ""}`;
          else if (artifacts > 0) label = "artifacts";
        }
        const newest = all.at(-1);
        if (newest === undefined) expected = { event: "resume", kind: "fresh" };
        else if (mode === "full") {
          const pointer = await checkPointer(newest);
          expected =
            pointer === undefined
              ? { event: "resume", kind: "fresh" }
              : { event: "resume", kind: "checkpoint", ...pointer };
        } else {
          expected =
            (await checkArtifacts(newest, seen)) > 0
              ? { event: "refused" }
              : { event: "resume", kind: "fresh" };
        }
        return `${mode}:${label}`;
      };

      /** The run's first line must be the decision the rules give for the state it started from. */
      const checkDecision = (stdout: string) => {
        const line = stdout.split("\n")[0];
        if (line === undefined || line === "") return; // killed before it decided
        const first = JSON.parse(line) as Record<string, unknown>;
        if (expected.event === "refused") {
          expect(first).toMatchObject({ event: "refused", code: "MANAGER_COLD_RESTART_OVER_ARTIFACT" });
        } else if (expected.kind === "fresh") {
          expect(first).toMatchObject({ event: "resume", kind: "fresh" });
        } else {
          expect(first).toMatchObject({ event: "resume", kind: "checkpoint", iteration: expected.iteration });
          expect(first.validation).toBe(expected.validation);
        }
      };

      const report = await runCrashSuite({
        seed,
        kills,
        killsPerRound: 8,
        startup: { args: [SCRIPT, "--startup"] },
        command: () => ({ args: [SCRIPT, outputRoot, mode, String(STEPS[mode])] }),
        prepare: async (r) => {
          if (!Number.isNaN(current)) await rm(roundDir(current), { recursive: true, force: true });
          current = r;
          outputRoot = roundDir(r);
          mode = ((r % 2) + 2) % 2 === 0 ? "full" : "artifact";
          expected = { event: "resume", kind: "fresh" };
          seen.clear();
        },
        afterKill: async ({ result }) => {
          checkDecision(result.stdout);
          const label = await inspect();
          states[label] = (states[label] ?? 0) + 1;
          return label;
        },
        afterCompletion: async ({ result }) => {
          checkDecision(result.stdout);
          expect(result.stdout.trim().split("\n").at(-1)).toBe(JSON.stringify({ event: "done" }));
          await inspect();
          const newest = (await attempts(outputRoot)).at(-1)!;
          if (mode === "full") {
            expect(await checkPointer(newest)).toEqual({ iteration: STEPS.full, validation: undefined });
            const dirs = (await readdir(join(newest, "checkpoints"))).filter((n) => n.startsWith("iter_"));
            // keep_model_last=3, applied after each save: a run that had nothing left to save (the kill
            // fell between the last pointer and its retention) leaves that one extra directory.
            const saved = result.stdout.includes('"event":"saved"');
            expect(dirs.length).toBeLessThanOrEqual(saved ? 3 : 4);
          } else {
            expect(await checkArtifacts(newest, seen)).toBe(STEPS.artifact);
          }
        },
        budgetMs: crashBudgetMs(600_000, kills),
        runTimeoutMs: 60_000,
        log: (line) => console.log(line),
      });
      console.log(`manager crash states: ${JSON.stringify(states)}`);
      expect(report.kills).toBeGreaterThanOrEqual(kills);
      // Kills must have landed inside the work, not only before the first save.
      const beyondStart = Object.entries(states)
        .filter(([label]) => !label.endsWith(":empty"))
        .reduce((sum, [, n]) => sum + n, 0);
      expect(beyondStart).toBeGreaterThan(0);
    },
    crashBudgetMs(660_000, kills),
  );
});
