// Runs one Python test module (test/python/<module>.py) against the built sidecar in one Python
// process, then reports one vitest case per Python test so a failure names it.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it, TestRunner } from "vitest";
import { PYTHON_CLIENT_DIR } from "../src/package-files.js";

const HERE = join(import.meta.dirname, "python");
/** The built sidecar, or `$CKPT_TRAINER_BIN_JS` (a pinned copy that a concurrent rebuild cannot remove). */
const BIN = process.env.CKPT_TRAINER_BIN_JS ?? join(import.meta.dirname, "..", "dist", "bin.js");
/**
 * One bound for a whole module's run: its first case waits for all of them, and test_dcp spawns
 * real gloo ranks several times over (2- and 4-rank saves, async_save, the FSDP2 example), which
 * under a loaded CI machine has taken past ten minutes.
 */
const MODULE_TIMEOUT_MS = 1_200_000;

type Outcomes = Record<string, { ok: boolean; detail: string }>;

/**
 * The bound of a module holding a crash loop of `defaultKills` SIGKILLs (`$CKPT_CRASH_KILLS`
 * overrides them, as in the other crash suites): `msForDefault`, scaled by the kills asked for.
 */
export function crashLoopTimeoutMs(msForDefault: number, defaultKills: number): number {
  const given = Number(process.env.CKPT_CRASH_KILLS || defaultKills);
  return Math.round(msForDefault * Math.max(1, given / defaultKills));
}

/**
 * One vitest case per test of `module`, run by `python` (an interpreter path, or a function giving
 * it, called only in a run that keeps torch-tagged tests).
 */
export function pythonSuite(
  title: string,
  module: string,
  python: string | (() => string),
  /** More environment for the run, asked for when it starts (after the file's beforeAll). */
  extraEnv: () => Record<string, string> = () => ({}),
  /** The bound of the module's whole run (a crash loop's grows with its kills). */
  timeoutMs = MODULE_TIMEOUT_MS,
): void {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build @ckpt/trainer-binding first`);
  const env = {
    ...process.env,
    PYTHONPATH: `${PYTHON_CLIENT_DIR}:${HERE}`,
    CKPT_TRAINER_BIN: `${process.execPath} ${BIN}`,
    NODE_NO_WARNINGS: "1",
  };
  const interpreter = (): string => (typeof python === "string" ? python : python());

  /** The Python test ids, listed before any runs so each becomes a named case. */
  function listTests(): string[] {
    const code = `import run_tests, ${module}, unittest\nfor t in run_tests.walk(unittest.defaultTestLoader.loadTestsFromModule(${module})): print(t.id())`;
    const listed = spawnSync(interpreter(), ["-c", code, "/dev/null"], { env, encoding: "utf8" });
    if (listed.status !== 0)
      throw new Error(`listing the Python tests of ${module} failed:\n${listed.stderr}`);
    return listed.stdout.trim().split("\n");
  }

  let outcomes: Outcomes | undefined;
  let log = "";
  async function runAll(): Promise<Outcomes> {
    if (outcomes !== undefined) return outcomes;
    const dir = await testdir(`ckpt-${module}-`);
    const file = join(dir, "outcomes.json");
    const run = spawnSync(interpreter(), [join(HERE, "run_tests.py"), file, module], {
      env: { ...env, ...extraEnv(), TMPDIR: dir },
      encoding: "utf8",
      timeout: timeoutMs,
    });
    log = `${run.stdout}\n${run.stderr}`;
    // A crash loop's report, for tools/bench/crash-soak.bench.mjs (which reads this process's output).
    for (const report of log.match(/^crash suite done: .*$/gm) ?? []) console.log(report);
    if (run.status !== 0) throw new Error(`the Python test driver failed:\n${log}`);
    outcomes = JSON.parse(readFileSync(file, "utf8")) as Outcomes;
    return outcomes;
  }

  // Listing starts Python at collection, so it happens only in a run that keeps torch-tagged tests.
  const ids = TestRunner.matchesTags(["torch"])
    ? listTests()
    : ["skipped: the run excludes torch-tagged tests"];

  describe(title, () => {
    for (const id of ids) {
      it(id.replace(new RegExp(`^${module}\\.`), ""), { timeout: timeoutMs }, async () => {
        const outcome = (await runAll())[id];
        expect(outcome, `no outcome for ${id}\n${log}`).toBeDefined();
        expect(outcome!.ok, outcome!.detail).toBe(true);
      });
    }
  });
}
