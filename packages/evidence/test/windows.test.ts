// The attempt's `windows`: the process windows of the manager's log, null without a log, and a
// damaged log is a problem of the closed set (never a crash).
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CheckpointManager, parseManagerConfig, WINDOWS_FILE } from "@ckpt/trainer-checkpoint-manager";
import { testdir } from "@ckpt/test-utils";
import { expect, it } from "vitest";
import { buildEvidence, evidenceSchema } from "../src/index.js";

/** Opens and finalizes a manager `times` times on one attempt: that many windows. */
async function attemptWithWindows(times: number): Promise<string> {
  const root = await testdir("ckpt-evidence-windows-");
  let attemptDir = "";
  for (let i = 0; i < times; i++) {
    const manager = await CheckpointManager.open({
      config: parseManagerConfig({ save_every: 1, run_ts: "20260901120000" }).config,
      outputRoot: root,
      project: "proj",
      group: "grp",
      name: "run",
      termination: { signals: false, sentinelPath: null },
    });
    attemptDir = manager.attemptDir;
    await manager.finalize();
  }
  // An attempt is a directory with a checkpoints root; these windows saved nothing yet.
  await mkdir(join(attemptDir, "checkpoints"));
  return attemptDir;
}

it("an attempt's windows are the manager's log of process windows", async () => {
  const attempt = await attemptWithWindows(2);
  const bundle = await buildEvidence(attempt);
  expect(evidenceSchema.parse(bundle)).toEqual(bundle);
  expect(bundle.attempts.map((a) => a.windows)).toEqual([2]);
  expect(bundle.problems).toEqual([]);
});

it("a damaged log leaves windows null and is reported as INVALID_RECORD naming the file", async () => {
  const attempt = await attemptWithWindows(1);
  const path = join(attempt, WINDOWS_FILE);
  await writeFile(path, "not json");
  const bundle = await buildEvidence(attempt);
  expect(evidenceSchema.parse(bundle)).toEqual(bundle);
  expect(bundle.attempts.map((a) => a.windows)).toEqual([null]);
  expect(bundle.problems).toMatchObject([{ code: "INVALID_RECORD", subject: path }]);
});
