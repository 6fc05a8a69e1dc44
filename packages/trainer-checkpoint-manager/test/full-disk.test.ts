// Issue 16: a manager save on a full disk. The output root lives on a real tmpfs mounted for the
// test (the suite runs as root); a failed mount fails the suite rather than skipping it.
import { readdir, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import { ARTIFACT_MANIFEST, LATEST_POINTER, pathKind, TENSOR_INVENTORY } from "@ckpt/manifest";
import { fillDisk, smallDisk } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  CHECKPOINT_DESCRIPTION_FILE,
  type CheckpointManager,
  type ManagerError,
  type SaveDue,
  VALIDATION_STATE_FILE,
} from "../src/index.js";
import { openManager, saveStep, writeTargets } from "./helpers.js";

const MiB = 1024 * 1024;
const PAGE = 4096;

const latestOf = async (manager: CheckpointManager) =>
  (await LATEST_POINTER.read(join(manager.attemptDir, "checkpoints", "latest_checkpoint.txt"))).iteration;

/** Names of atomic writes' temporaries (`.<name>.tmp-<pid>-<hex>`) left anywhere under `dir`. */
async function temporaries(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).map(String).filter((n) => /\.tmp-\d+-/.test(n));
}

/**
 * Saves step 1, then tries step 2 with one page more free space per attempt after the components
 * are written, so each record the commit writes in turn meets ENOSPC; each failure must leave the
 * pointer on step 1 and no temporary. Returns the records that failed, in order.
 */
async function sweepCommit(raw: Record<string, unknown>, due: SaveDue): Promise<string[]> {
  const disk = await smallDisk(4 * MiB);
  const { manager } = await openManager(join(disk, "out"), { save_async: false, save_every: 1, ...raw });
  await saveStep(manager, 1, { cadence: true });
  const failed: string[] = [];
  for (let leave = 0; leave < 32 * PAGE; leave += PAGE) {
    const session = await manager.beginSave(2, manager.planSave(2, due)!);
    await writeTargets(session.targets);
    const filler = await fillDisk(disk, leave);
    try {
      const outcome = await manager.commitSave(session);
      expect(outcome.status).toBe("committed");
      expect(await latestOf(manager)).toBe(2);
      return failed;
    } catch (error) {
      expect(error).toMatchObject({ code: "MANAGER_NO_SPACE", kind: "failed" });
      const subject = (error as ManagerError).subject!;
      expect((error as Error).message).toContain(subject);
      expect((error as Error).message).toContain("free space and run again");
      failed.push(basename(subject));
      expect(await latestOf(manager)).toBe(1);
      expect(await temporaries(disk)).toEqual([]);
    } finally {
      await rm(filler);
    }
  }
  throw new Error(`step 2 did not commit with ${32 * PAGE} bytes free; failed: ${failed.join(", ")}`);
}

describe("manager save on a full disk", () => {
  it("fails the tensor inventory, the description and then the pointer with MANAGER_NO_SPACE, the pointer on the previous checkpoint, and the same step commits once space is freed", async () => {
    expect(await sweepCommit({}, { cadence: true })).toEqual([
      TENSOR_INVENTORY.fileName,
      CHECKPOINT_DESCRIPTION_FILE,
      "latest_checkpoint.txt",
    ]);
  });

  it("with validation pending, also fails the validation record between them", async () => {
    expect(await sweepCommit({ validation: { save_checkpoint: true } }, { validation: true })).toEqual([
      TENSOR_INVENTORY.fileName,
      CHECKPOINT_DESCRIPTION_FILE,
      VALIDATION_STATE_FILE,
      "latest_checkpoint.txt",
    ]);
  });

  it("a component the trainer cannot write leaves the pointer on the previous checkpoint; the step saves again once space is freed", async () => {
    const disk = await smallDisk(4 * MiB);
    const { manager } = await openManager(join(disk, "out"), { save_async: false, save_every: 1 });
    await saveStep(manager, 1, { cadence: true });
    for (const component of ["model", "optim", "trainer"] as const) {
      const session = await manager.beginSave(2, manager.planSave(2, { cadence: true })!);
      // The components before this one fit; this one meets the full disk.
      const before = (["model", "optim", "trainer"] as const).slice(
        0,
        ["model", "optim", "trainer"].indexOf(component),
      );
      await writeTargets(session.targets, { only: before });
      const filler = await fillDisk(disk, 0);
      // The trainer's write, handed to the commit as `written` (as an async save does).
      const written = writeTargets(session.targets, { only: [component], size: 64 * 1024 });
      const refusal = manager.commitSave(session, { written });
      await expect(refusal).rejects.toMatchObject({ code: "MANAGER_NO_SPACE", subject: session.dir });
      await expect(refusal).rejects.toThrow("free space and run again");
      expect(await latestOf(manager)).toBe(1);
      expect(await temporaries(disk)).toEqual([]);
      await rm(filler);
    }
    await saveStep(manager, 2, { cadence: true });
    expect(await latestOf(manager)).toBe(2);
  });

  it("an artifact's manifest on a full disk fails with MANAGER_NO_SPACE naming it; nothing is committed, and the same step commits once space is freed", async () => {
    const disk = await smallDisk(4 * MiB);
    const { manager } = await openManager(join(disk, "out"), {
      save_async: false,
      save_every: 1,
      checkpoint_components: ["model"],
    });
    const session = await manager.beginSave(1, manager.planSave(1, { cadence: true })!);
    await writeTargets(session.targets);
    const filler = await fillDisk(disk, 0);
    const refusal = manager.commitSave(session);
    await expect(refusal).rejects.toMatchObject({
      code: "MANAGER_NO_SPACE",
      kind: "failed",
      subject: join(session.dir, ARTIFACT_MANIFEST.fileName),
    });
    await expect(refusal).rejects.toThrow(join(session.dir, ARTIFACT_MANIFEST.fileName));
    expect(await pathKind(join(session.dir, ARTIFACT_MANIFEST.fileName))).toBe("absent");
    expect(await temporaries(disk)).toEqual([]);
    await rm(filler);
    const again = await manager.beginSave(1, manager.planSave(1, { cadence: true })!);
    await writeTargets(again.targets);
    expect(await manager.commitSave(again)).toMatchObject({ status: "committed" });
    expect(await pathKind(join(again.dir, ARTIFACT_MANIFEST.fileName))).toBe("file");
  });
});
