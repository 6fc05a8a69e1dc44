// @module-tag torch
// Runs the Python client's tests (test/python/test_client.py) against the built sidecar in one
// Python process, then reports one vitest case per Python test so a failure names it.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { TORCH_PYTHON as PYTHON, testdir } from "@ckpt/test-utils";
import { describe, expect, it, TestRunner } from "vitest";
import { PYTHON_CLIENT_DIR } from "../src/package-files.js";

const HERE = join(import.meta.dirname, "python");
/** The built sidecar, or `$CKPT_TRAINER_BIN_JS` (a pinned copy that a concurrent rebuild cannot remove). */
const BIN = process.env.CKPT_TRAINER_BIN_JS ?? join(import.meta.dirname, "..", "dist", "bin.js");
if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build @ckpt/trainer-binding first`);

const env = {
  ...process.env,
  PYTHONPATH: `${PYTHON_CLIENT_DIR}:${HERE}`,
  CKPT_TRAINER_BIN: `${process.execPath} ${BIN}`,
  NODE_NO_WARNINGS: "1",
};

/** The Python test ids, listed before any runs so each becomes a named case. */
function listTests(): string[] {
  const code =
    "import run_tests, test_client, unittest\nfor t in run_tests.walk(unittest.defaultTestLoader.loadTestsFromModule(test_client)): print(t.id())";
  const listed = spawnSync(PYTHON, ["-c", code, "/dev/null"], { env, encoding: "utf8" });
  if (listed.status !== 0) throw new Error(`listing the Python client tests failed:\n${listed.stderr}`);
  return listed.stdout.trim().split("\n");
}

let outcomes: Record<string, { ok: boolean; detail: string }> | undefined;
let log = "";
async function runAll(): Promise<Record<string, { ok: boolean; detail: string }>> {
  if (outcomes !== undefined) return outcomes;
  const dir = await testdir("ckpt-client-tests-");
  const file = join(dir, "outcomes.json");
  const run = spawnSync(PYTHON, [join(HERE, "run_tests.py"), file], {
    env,
    encoding: "utf8",
    timeout: 600_000,
  });
  log = `${run.stdout}\n${run.stderr}`;
  if (run.status !== 0) throw new Error(`the Python test driver failed:\n${log}`);
  outcomes = JSON.parse(readFileSync(file, "utf8")) as Record<string, { ok: boolean; detail: string }>;
  return outcomes;
}

// Listing starts Python at collection, so it happens only in a run that keeps torch-tagged tests.
const ids = TestRunner.matchesTags(["torch"])
  ? listTests()
  : ["skipped: the run excludes torch-tagged tests"];

describe("ckpt_trainer_client.py against the sidecar", () => {
  for (const id of ids) {
    it(id.replace(/^test_client\./, ""), { timeout: 600_000 }, async () => {
      const outcome = (await runAll())[id];
      expect(outcome, `no outcome for ${id}\n${log}`).toBeDefined();
      expect(outcome!.ok, outcome!.detail).toBe(true);
    });
  }
});
