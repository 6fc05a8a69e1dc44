// runStatus and checkResumable (the reports behind `ckpt run status` and `ckpt resumable`) on
// attempts this manager wrote: cadence saves with retention, a model-only artifact, a save that
// never committed, a pending validation and a damaged pointer. The CLI tests cover rendering and
// exit codes.
import { lstat, mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { verifyCheckpointDir } from "@ckpt/verify";
import { describe, expect, it } from "vitest";
import { checkResumable, runStatus } from "../src/index.js";
import { openManager, saveStep, tempRoot, writeTargets } from "./helpers.js";

const sync = { save_async: false };
const iterDir = (attemptDir: string, i: number) =>
  join(attemptDir, "checkpoints", `iter_${String(i).padStart(9, "0")}`);

/** Full saves at `steps` (optimizer kept for the newest `keepOptim`), then a model-only artifact at 15. */
async function trainedAttempt(steps: readonly number[], keepOptim: number): Promise<string> {
  const root = await tempRoot();
  const { manager } = await openManager(root, { ...sync, save_every: 10, keep_optim_last: keepOptim });
  for (const step of steps) await saveStep(manager, step, { cadence: true });
  await manager.finalize();
  const { manager: partial } = await openManager(root, {
    ...sync,
    save_every: 5,
    checkpoint_components: ["model"],
  });
  await saveStep(partial, 15, { cadence: true });
  await partial.finalize();
  return manager.attemptDir;
}

describe("runStatus", () => {
  it("lists checkpoints newest first with components on disk, sizes, pointer, artifacts and the resume decision", async () => {
    const attemptDir = await trainedAttempt([10, 20, 30], 1);
    const report = await runStatus(attemptDir);
    expect(report.ok).toBe(true);
    expect(report.attemptDir).toBe(attemptDir);
    expect(report.pointer).toMatchObject({ state: "present", iteration: 30 });
    expect(report.resume).toMatchObject({ decision: "checkpoint", iteration: 30 });
    expect(report.resume.reason).toContain("latest complete checkpoint");
    // The newest committed checkpoint is complete: the older ones are not probed.
    expect(report.checkpoints.map((c) => [c.iteration, c.latest, c.complete, c.hasOptimizer])).toEqual([
      [30, true, true, true],
      [20, false, null, false], // keep_optim_last=1 released its optimizer state
      [10, false, null, false],
    ]);
    const newest = report.checkpoints[0]!;
    for (const c of newest.components)
      expect([c.present, c.bytes]).toEqual([true, (await lstat(c.path)).size]);
    expect(newest.bytes).toBe(newest.components.reduce((s, c) => s + c.bytes, 0));
    expect(newest.components.map((c) => c.name)).toEqual(
      expect.arrayContaining(["model", "optim", "trainer"]),
    );
    expect(newest.depth).toBe("probed");
    // The older ones are not probed, yet their layout is known from retention's listing: format,
    // components (the optimizer state released) and their sizes on disk now.
    for (const older of report.checkpoints.slice(1)) {
      expect(older).toMatchObject({
        depth: "listed",
        format: "consolidated",
        problems: [],
        manifestSha256: null,
      });
      expect(older.components.map((c) => [c.name, c.kind, c.present])).toEqual([
        ["model", "file", true],
        ["trainer", "file", true],
      ]);
      for (const c of older.components) expect(c.bytes).toBe((await lstat(c.path)).size);
      expect(older.bytes).toBe(older.components.reduce((s, c) => s + c.bytes, 0));
      expect(older.bytes).toBeGreaterThan(0);
    }
    expect(report.artifacts).toEqual([
      expect.objectContaining({ iteration: 15, components: ["model"], local: "yes", archivedTo: null }),
    ]);
    expect(report.artifacts[0]!.bytes).toBeGreaterThan(0);
    expect(report.pendingValidation).toEqual([]);
    expect(report.problems).toEqual([]);
  });

  it("lists a DCP checkpoint it does not probe as dcp, its directory components summed", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 10,
      keep_optim_last: 2,
      checkpoint_format: "dcp",
    });
    for (const step of [10, 20]) await saveStep(manager, step, { cadence: true });
    await manager.finalize();
    const report = await runStatus(manager.attemptDir);
    const [newest, older] = report.checkpoints;
    expect([newest?.depth, older?.depth]).toEqual(["probed", "listed"]);
    expect(older?.format).toBe("dcp");
    expect(older?.components.map((c) => [c.name, c.kind])).toEqual(
      newest?.components.map((c) => [c.name, c.kind]),
    );
    // The same writer wrote both: the listed sizes are the probed ones.
    expect(older?.components.map((c) => c.bytes)).toEqual(newest?.components.map((c) => c.bytes));
    expect(older?.components.find((c) => c.name === "model")).toMatchObject({ kind: "directory" });
    expect(older?.bytes).toBe(newest?.bytes);
  });

  it("probes lazily, newest committed first, up to the first complete one: 20,000 empty iter_* directories cost one probe", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1, keep_model_last: 0 });
    await saveStep(manager, 20_001, { cadence: true });
    await manager.finalize();
    const checkpointsRoot = join(manager.attemptDir, "checkpoints");
    await Promise.all(
      Array.from({ length: 20_000 }, (_, i) =>
        mkdir(join(checkpointsRoot, `iter_${String(i + 1).padStart(9, "0")}`)),
      ),
    );
    const probed = (r: Awaited<ReturnType<typeof runStatus>>) =>
      r.checkpoints.filter((c) => c.complete !== null);
    const report = await runStatus(manager.attemptDir);
    expect(report.checkpoints).toHaveLength(20_001);
    expect(probed(report).map((c) => [c.iteration, c.complete])).toEqual([[20_001, true]]);
    expect(report.resume).toMatchObject({ decision: "checkpoint", iteration: 20_001 });
    // The pointer on an empty directory: the walk goes down until the candidates run out.
    await writeFile(join(checkpointsRoot, "latest_checkpoint.txt"), "iter_000000003\n");
    const behind = await runStatus(manager.attemptDir);
    expect(probed(behind).map((c) => [c.iteration, c.complete])).toEqual([
      [3, false],
      [2, false],
      [1, false],
    ]);
    expect(behind.resume).toMatchObject({ decision: "refused", code: "MANAGER_RESUME_INCOMPLETE" });
    // No pointer: nothing committed, nothing probed.
    await rm(join(checkpointsRoot, "latest_checkpoint.txt"));
    expect(probed(await runStatus(manager.attemptDir))).toEqual([]);
  }, 300_000);

  it("marks a save that never committed past the pointer; resume stays on the pointer", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 10, keep_optim_last: 0 });
    await saveStep(manager, 10, { cadence: true });
    const session = await manager.beginSave(20, manager.planSave(20, { cadence: true })!);
    await writeTargets(session.targets); // the process dies before the commit
    const report = await runStatus(manager.attemptDir);
    expect(report.resume).toMatchObject({ decision: "checkpoint", iteration: 10 });
    expect(report.checkpoints.map((c) => [c.iteration, c.latest, c.pastPointer])).toEqual([
      [20, false, true],
      [10, true, false],
    ]);
  });

  it("reports a full checkpoint whose validation is pending", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 0,
      validation: { save_checkpoint: true },
    });
    const saved = await saveStep(manager, 5, { validation: true });
    expect(saved?.plan.validation).toBe("pending");
    const report = await runStatus(manager.attemptDir);
    expect(report.ok).toBe(true);
    expect(report.pendingValidation).toEqual([{ iteration: 5, state: "evaluation_pending" }]);
    expect(report.checkpoints[0]!.validation).toBe("evaluation_pending");
  });

  it("is not ok, with the refusal, when resume=auto would refuse (a damaged pointer)", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 10 });
    await saveStep(manager, 10, { cadence: true });
    await writeFile(join(manager.checkpointsRoot, "latest_checkpoint.txt"), "garbage\n");
    const report = await runStatus(manager.attemptDir);
    expect(report.ok).toBe(false);
    expect(report.pointer.state).toBe("invalid");
    expect(report.resume).toMatchObject({ decision: "refused", code: "MANAGER_RESUME_POINTER_INVALID" });
  });
});

describe("checkResumable", () => {
  it("yes for the latest full checkpoint; no (with the manager's code) for a released, a behind-artifact or a mis-pinned one", async () => {
    const attemptDir = await trainedAttempt([10, 20, 30], 1);
    const latest = await checkResumable(iterDir(attemptDir, 30), null);
    expect(latest).toMatchObject({ ok: true, resumable: true, code: null, iteration: 30, latest: true });
    expect(latest.manifestSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.keys(latest.components)).toEqual(expect.arrayContaining(["model", "optim", "trainer"]));
    expect(await checkResumable(iterDir(attemptDir, 30), latest.manifestSha256)).toMatchObject({
      resumable: true,
    });
    const pinned = await checkResumable(iterDir(attemptDir, 30), "0".repeat(64));
    expect(pinned).toMatchObject({ ok: false, resumable: false, code: "MANAGER_RESUME_PIN_MISMATCH" });
    const released = await checkResumable(iterDir(attemptDir, 20), null);
    expect(released).toMatchObject({ resumable: false, code: "MANAGER_RESUME_INCOMPLETE", latest: false });
    expect(released.reason).toContain("optim");
    expect(released.problems).not.toEqual([]);
    const artifact = await checkResumable(join(attemptDir, "checkpoint_artifacts", "iter_000000015"), null);
    expect(artifact.resumable).toBe(false);
  });

  it("a DCP optimizer retention released as a whole is retention state for verify and a refusal for resume; half of one is missing files", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 10,
      keep_optim_last: 2,
      checkpoint_format: "dcp",
    });
    for (const step of [10, 20, 30]) await saveStep(manager, step, { cadence: true });
    await manager.finalize();
    const released = await verifyCheckpointDir(iterDir(manager.attemptDir, 10));
    expect(released).toMatchObject({ ok: true, problems: [] });
    expect(released.retention?.hasOptimizer).toBe(false);
    expect(released.retention?.optimizerReleased).toContain("optim/.metadata");
    const refused = await checkResumable(iterDir(manager.attemptDir, 10), null);
    expect(refused).toMatchObject({ resumable: false, code: "MANAGER_RESUME_INCOMPLETE" });
    expect(refused.reason).toContain("retention released the optimizer state (keep_optim_last)");
    // One shard of an optimizer that is otherwise here: damage, named by file.
    const half = iterDir(manager.attemptDir, 20);
    const shard = (await readdir(join(half, "optim"))).find((n) => n.endsWith(".distcp"))!;
    await rm(join(half, "optim", shard));
    const damaged = await verifyCheckpointDir(half);
    expect(damaged.ok).toBe(false);
    expect(damaged.problems.map((p) => `${p.code} ${p.path}`)).toContain(
      `VERIFY_FILE_MISSING optim/${shard}`,
    );
    expect(damaged.retention).toEqual({ hasOptimizer: true, optimizerReleased: [] });
  });

  it("no for a complete checkpoint behind a committed artifact of its attempt", async () => {
    const attemptDir = await trainedAttempt([10], 0);
    const behind = await checkResumable(iterDir(attemptDir, 10), null);
    expect(behind).toMatchObject({ resumable: false, code: "MANAGER_RESUME_BEHIND_ARTIFACT", problems: [] });
  });
});
