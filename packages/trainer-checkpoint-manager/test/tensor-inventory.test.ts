// @module-tag torch
// The checkpoint description's tensor inventory (seed 002): every file's SHA-256, and for each
// torch.save file and DCP directory its tensors with dtype and global shape, on real torch 2
// output; resume refuses a checkpoint whose bytes or tensors changed, naming the file.
import { execFile } from "node:child_process";
import { copyFile, cp, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  CHECKPOINT_DESCRIPTION,
  CHECKPOINT_DESCRIPTION_FILE,
  type InventoryTensor,
  TENSOR_INVENTORY,
  tensorListDigest,
} from "@ckpt/manifest";
import { DCP_FIXTURE_TIMEOUT_MS, realDcpFixtures, testdir, torch2Python } from "@ckpt/test-utils";
import { verifyCheckpointDir } from "@ckpt/verify";
import { beforeAll, describe, expect, it } from "vitest";
import type { ComponentTargets, ManagerError } from "../src/index.js";
import { openManager, saveStep, tempRoot, writeTorchState } from "./helpers.js";

const sync = { save_async: false };
const dcp = realDcpFixtures([2], "ckpt-manager-inventory-");

/** torch's dtype names (the fixture generator's) as ckpt lists them. */
const CKPT_DTYPE: Record<string, string> = { float32: "F32", bfloat16: "BF16", int32: "I32" };

/**
 * Consolidated model files written by torch.save itself (one interpreter start: importing torch on
 * a busy machine takes long): nested dicts, three dtypes; `omega.pt` renames the nested key of
 * `alpha.pt`, the same size with another tensor name.
 */
let torchSaved = "";
beforeAll(async () => {
  torchSaved = await testdir("ckpt-manager-inventory-pt-");
  const script = [
    "import sys, os, torch",
    "for key in ('alpha', 'omega'):",
    "    torch.save({'w': torch.ones(3, 4), 'b': torch.zeros(4, dtype=torch.bfloat16),",
    "                key: {'x': torch.arange(2)}}, os.path.join(sys.argv[1], key + '.pt'))",
  ].join("\n");
  await promisify(execFile)(torch2Python(), ["-c", script, torchSaved]);
}, DCP_FIXTURE_TIMEOUT_MS);

function committed(step: Awaited<ReturnType<typeof saveStep>>) {
  if (step?.outcome.status !== "committed")
    throw new Error(`not committed: ${JSON.stringify(step?.outcome)}`);
  return step.outcome.report;
}

async function recorded(dir: string) {
  return {
    description: await CHECKPOINT_DESCRIPTION.read(join(dir, CHECKPOINT_DESCRIPTION_FILE)),
    sidecar: await TENSOR_INVENTORY.read(join(dir, TENSOR_INVENTORY.fileName)),
  };
}

/** Writes the fixture's real 2-rank DCP output at each directory target, a torch.save trainer state at trainer.pt. */
async function writeRealDcp(targets: ComponentTargets): Promise<void> {
  for (const target of [targets.model!, targets.optim!])
    await cp(join(dcp.root, "ranks2"), target, { recursive: true });
  await writeTorchState(targets.trainer!, { optimizer_step: 5 });
}

/** A consolidated save: model.pt by torch.save itself, optimizer and trainer state by @ckpt/tensors. */
async function writeConsolidated(targets: ComponentTargets): Promise<void> {
  await copyFile(join(torchSaved, "alpha.pt"), targets.model!);
  await writeTorchState(targets.optim!);
  await writeTorchState(targets.trainer!, { optimizer_step: 5 });
}

describe("the description's tensor inventory", () => {
  it("a DCP component lists the tensors of its .metadata with dtype and global shape, as torch reads them", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 5, checkpoint_format: "dcp" });
    const saved = committed(await saveStep(manager, 5, { cadence: true }, writeRealDcp));
    const { description, sidecar } = await recorded(saved.dir);
    const torchSays = dcp.fixtures.ranks2!.tensors.map((t) => ({
      name: t.fqn,
      dtype: CKPT_DTYPE[t.dtype] ?? `unmapped ${t.dtype}`,
      shape: [...t.shape],
    }));
    const byName = (a: InventoryTensor, b: InventoryTensor) => (a.name < b.name ? -1 : 1);
    for (const name of ["model", "optim"] as const) {
      expect(sidecar.components[name]).toEqual([...torchSays].sort(byName));
      const component = description.physical_components.find((c) => c.name === name)!;
      expect(component.tensors).toEqual(tensorListDigest(torchSays));
      // Every file keeps its SHA-256 beside the tensor summary.
      expect(component.kind === "dir" && component.files.every((f) => f.sha256 !== undefined)).toBe(true);
    }
    expect(sidecar.components.trainer).toEqual([{ name: "net.w", dtype: "F32", shape: [2] }]);
  });

  it("a consolidated model.pt written by torch.save lists its nested tensors", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 5 });
    const saved = committed(await saveStep(manager, 5, { cadence: true }, writeConsolidated));
    const { description, sidecar } = await recorded(saved.dir);
    const model = [
      { name: "alpha.x", dtype: "I64", shape: [2] },
      { name: "b", dtype: "BF16", shape: [4] },
      { name: "w", dtype: "F32", shape: [3, 4] },
    ];
    expect(sidecar.components.model).toEqual(model);
    expect(description.physical_components.find((c) => c.name === "model")).toMatchObject({
      kind: "file",
      path: "model.pt",
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      tensors: tensorListDigest(model),
    });
  });

  it("a description without tensor summaries (written before them) is still read and judged", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 5 });
    const saved = committed(await saveStep(manager, 5, { cadence: true }));
    const path = join(saved.dir, CHECKPOINT_DESCRIPTION_FILE);
    const older = JSON.parse(await readFile(path, "utf8")) as {
      physical_components: Array<{ tensors?: unknown }>;
    };
    for (const c of older.physical_components) delete c.tensors;
    await writeFile(path, JSON.stringify(older));
    expect((await verifyCheckpointDir(saved.dir)).problems).toEqual([]);
    const { manager: resumed } = await openManager(root, { ...sync, resume: saved.dir });
    expect(await resumed.resolveResume()).toMatchObject({ kind: "checkpoint", iteration: 5 });
  });
});

describe("resume checks identity before restoring", () => {
  it("a flipped byte in a DCP shard: auto, explicit and pinned resume refuse, naming the shard", async () => {
    const root = await tempRoot();
    const first = await openManager(root, { ...sync, save_every: 5, checkpoint_format: "dcp" });
    const saved = committed(await saveStep(first.manager, 5, { cadence: true }, writeRealDcp));
    const shard = join(saved.dir, "model", "__1_0.distcp");
    const bytes = await readFile(shard);
    bytes[bytes.length >> 1]! ^= 0x01;
    await writeFile(shard, bytes);
    for (const config of [
      { ...sync, checkpoint_format: "dcp" },
      { ...sync, resume: saved.dir },
      { ...sync, resume: saved.dir, resume_sha256: saved.manifestSha256 },
    ]) {
      const { manager } = await openManager(root, config);
      const error = (await manager.resolveResume().catch((e: unknown) => e)) as ManagerError;
      expect(error.code).toBe("MANAGER_RESUME_IDENTITY_MISMATCH");
      expect(error.subject).toBe(shard);
      expect(error.message).toContain("VERIFY_DIGEST_MISMATCH model/__1_0.distcp");
    }
  });

  it("a model.pt whose tensors changed (same size) is refused by its tensor list, naming the file and the tensor", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 5 });
    const saved = committed(await saveStep(manager, 5, { cadence: true }, writeConsolidated));
    // The same model saved by torch with the nested key renamed.
    const path = join(saved.dir, "model.pt");
    const before = (await stat(path)).size;
    await copyFile(join(torchSaved, "omega.pt"), path);
    expect((await stat(path)).size).toBe(before);
    const sizesOnly = await verifyCheckpointDir(saved.dir, { digests: false });
    expect(sizesOnly.problems).toEqual([
      expect.objectContaining({
        code: "VERIFY_TENSORS_MISMATCH",
        path: "model.pt",
        message: expect.stringContaining("it lacks alpha.x I64 [2]"),
      }),
    ]);
    const { manager: pinned } = await openManager(root, {
      ...sync,
      resume: saved.dir,
      resume_sha256: saved.manifestSha256,
    });
    const error = (await pinned.resolveResume().catch((e: unknown) => e)) as ManagerError;
    expect(error.code).toBe("MANAGER_RESUME_IDENTITY_MISMATCH");
    expect(error.subject).toBe(path);
    expect(error.message).toContain("VERIFY_TENSORS_MISMATCH model.pt");
  });
});
