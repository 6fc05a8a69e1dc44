// @module-tag torch
// Placing an explicit legacy resume source without an iter_* path segment by its trainer state
// (seed 000: optimizer_step / iter at the top level of a single-file checkpoint or in trainer.pt),
// read from files written by real PyTorch.
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { TORCH_PYTHON as PYTHON } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { openManager, saveStep, tempRoot } from "./helpers.js";

const run = promisify(execFile);
/** Each torch.save runs a Python that imports torch: seconds on a busy machine. */
const TORCH_TIMEOUT = 120_000;

/** torch.save(state, path) with `state` given as a Python literal (tensors added under "net"). */
async function torchSave(path: string, state: string): Promise<void> {
  const script = `import torch, sys\nstate = ${state}\nstate["net"] = {"w": torch.ones(2, 2)}\ntorch.save(state, sys.argv[1])\n`;
  await run(PYTHON, ["-c", script, path]);
}

describe("explicit legacy resume placed by its trainer state (real torch.save files)", () => {
  const raw = { save_async: false, save_every: 10, checkpoint_components: ["model"] };

  async function attemptWithArtifactAt10(root: string) {
    const first = await openManager(root, raw);
    await saveStep(first.manager, 10, { cadence: true });
    await first.manager.finalize();
  }

  it(
    "a single-file checkpoint at or beyond the newest artifact resumes; behind it is refused",
    async () => {
      const root = await tempRoot();
      await attemptWithArtifactAt10(root);
      const ahead = join(root, "legacy", "state-ahead.pt");
      const behind = join(root, "legacy", "state-behind.pt");
      await mkdir(join(root, "legacy"), { recursive: true });
      await torchSave(ahead, '{"iter": 20, "optimizer_step": 20}');
      await torchSave(behind, '{"iter": 5}');
      const ok = await openManager(root, { ...raw, resume: ahead });
      expect(await ok.manager.resolveResume()).toMatchObject({
        kind: "checkpoint",
        format: "legacy_file",
        iteration: 20,
        legacyFile: ahead,
      });
      const refused = await openManager(root, { ...raw, resume: behind });
      await expect(refused.manager.resolveResume()).rejects.toMatchObject({
        code: "MANAGER_RESUME_BEHIND_ARTIFACT",
      });
    },
    TORCH_TIMEOUT,
  );

  it(
    "optimizer_step and iter that disagree place nothing: refused",
    async () => {
      const root = await tempRoot();
      await attemptWithArtifactAt10(root);
      const file = join(root, "legacy", "state.pt");
      await mkdir(join(root, "legacy"), { recursive: true });
      await torchSave(file, '{"iter": 21, "optimizer_step": 20}');
      const { manager } = await openManager(root, { ...raw, resume: file });
      await expect(manager.resolveResume()).rejects.toMatchObject({
        code: "MANAGER_RESUME_ITERATION_UNKNOWN",
      });
    },
    TORCH_TIMEOUT,
  );

  it(
    "a legacy directory is placed by optimizer_step in its trainer.pt",
    async () => {
      const root = await tempRoot();
      await attemptWithArtifactAt10(root);
      const dir = join(root, "legacy", "final");
      await mkdir(dir, { recursive: true });
      await torchSave(join(dir, "model.pt"), "{}");
      await torchSave(join(dir, "optim.pt"), '{"state": {}}');
      await torchSave(join(dir, "trainer.pt"), '{"optimizer_step": 30}');
      const { manager } = await openManager(root, { ...raw, resume: dir });
      expect(await manager.resolveResume()).toMatchObject({
        kind: "checkpoint",
        iteration: 30,
        format: "consolidated",
      });
    },
    TORCH_TIMEOUT,
  );
});
