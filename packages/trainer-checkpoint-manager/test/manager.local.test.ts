import { createHash } from "node:crypto";
import { access, mkdir, readdir, readFile, rm, truncate, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ARTIFACT_MANIFEST, LATEST_POINTER } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import {
  CHECKPOINT_DESCRIPTION_FILE,
  type CommitReport,
  ManagerError,
  VALIDATION_STATE_FILE,
} from "../src/index.js";
import {
  DCP_FIXTURE,
  openManager,
  saveStep,
  steppingClock,
  tempRoot,
  writeLegacyDir,
  writeTargets,
  writeTorchState,
} from "./helpers.js";

const sync = { save_async: false };
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );
const latestOf = async (attemptDir: string) =>
  (await LATEST_POINTER.read(join(attemptDir, "checkpoints", "latest_checkpoint.txt"))).iteration;

function committed(outcome: Awaited<ReturnType<typeof saveStep>>): CommitReport {
  if (outcome?.outcome.status !== "committed")
    throw new Error(`expected a committed outcome, got ${outcome?.outcome.status}`);
  return outcome.outcome.report;
}

describe("run attempts (seed 001 Layout)", () => {
  it("mints RUN_TS at the first launch and reuses it in a resumed window", async () => {
    const root = await tempRoot();
    const clock = steppingClock(60_000);
    const first = await openManager(root, sync, { clock });
    expect(first.manager.runTs).toBe("20260901120000");
    expect(first.manager.attemptDir).toBe(join(root, "proj", "grp", "run", "20260901120000"));
    await first.manager.finalize();
    const second = await openManager(root, sync, { clock });
    expect(second.manager.runTs).toBe("20260901120000");
    expect(second.manager.attempt.how).toBe("adopted");
  });

  it("resume=off mints a sibling attempt and leaves the old one untouched", async () => {
    const root = await tempRoot();
    const clock = steppingClock(60_000);
    const first = await openManager(root, { ...sync, save_every: 10 }, { clock });
    await saveStep(first.manager, 10, { final: true });
    await first.manager.finalize();
    const before = await readdir(join(first.manager.attemptDir, "checkpoints"));
    const { manager } = await openManager(root, { ...sync, resume: "off" }, { clock });
    expect(manager.attemptDir).not.toBe(first.manager.attemptDir);
    expect(await manager.resolveResume()).toMatchObject({ kind: "fresh" });
    expect(await readdir(join(first.manager.attemptDir, "checkpoints"))).toEqual(before);
  });

  it("a legacy job whose <name>/checkpoints/ exists keeps the flat layout", async () => {
    const root = await tempRoot();
    await mkdir(join(root, "proj", "grp", "run", "checkpoints"), { recursive: true });
    const { manager } = await openManager(root, { ...sync, save_every: 5 });
    expect(manager.attempt.layout).toBe("legacy");
    expect(manager.attemptDir).toBe(join(root, "proj", "grp", "run"));
    const saved = committed(await saveStep(manager, 5, { final: true, cadence: true }));
    expect(saved.dir).toBe(join(root, "proj", "grp", "run", "checkpoints", "iter_000000005"));
  });

  it("legacy flat layout with resume=off: refused at open when it holds checkpoints (never overwritten); run_ts is the way to a fresh attempt", async () => {
    const root = await tempRoot();
    const flat = join(root, "proj", "grp", "run", "checkpoints");
    await mkdir(flat, { recursive: true });
    const first = await openManager(root, { ...sync, save_every: 5 });
    await saveStep(first.manager, 5, { cadence: true });
    await saveStep(first.manager, 10, { cadence: true });
    await first.manager.finalize();
    const before = await readFile(join(flat, "iter_000000005", CHECKPOINT_DESCRIPTION_FILE));
    await expect(openManager(root, { ...sync, save_every: 5, resume: "off" })).rejects.toMatchObject({
      code: "MANAGER_LEGACY_FRESH_REFUSED",
      knob: "resume",
      subject: flat,
    });
    expect(await readFile(join(flat, "iter_000000005", CHECKPOINT_DESCRIPTION_FILE))).toEqual(before);
    expect(await latestOf(join(root, "proj", "grp", "run"))).toBe(10);
    const fresh = await openManager(root, {
      ...sync,
      save_every: 5,
      resume: "off",
      run_ts: "20260901130000",
    });
    expect(fresh.manager.attempt.layout).toBe("run_ts");
    expect(await fresh.manager.resolveResume()).toMatchObject({ kind: "fresh" });
  });

  it("a rank other than 0 needs RUN_TS from rank 0, computes the same targets and commits nothing", async () => {
    const root = await tempRoot();
    await expect(openManager(root, sync, { rank: 1 })).rejects.toMatchObject({
      code: "MANAGER_RUN_TS_REQUIRED",
    });
    const zero = await openManager(root, { ...sync, checkpoint_format: "dcp", save_every: 1 });
    const one = await openManager(
      root,
      { ...sync, checkpoint_format: "dcp", save_every: 1 },
      { rank: 1, runTs: zero.manager.runTs },
    );
    const plan = zero.manager.planSave(1, { cadence: true })!;
    const s0 = await zero.manager.beginSave(1, plan);
    const s1 = await one.manager.beginSave(1, plan);
    expect(s1.targets).toEqual(s0.targets);
    await writeTargets(s0.targets);
    expect(await one.manager.commitSave(s1)).toEqual({ status: "not_rank_zero" });
    expect((await zero.manager.commitSave(s0)).status).toBe("committed");
  });
});

describe("saving a full checkpoint (local primary)", () => {
  it("hands out targets, describes the written components and moves latest_checkpoint.txt last", async () => {
    const root = await tempRoot();
    const { manager, events } = await openManager(root, { ...sync, save_every: 10 });
    const plan = manager.planSave(10, { cadence: true })!;
    const session = await manager.beginSave(10, plan);
    expect(session.targets.model).toBe(join(manager.attemptDir, "checkpoints", "iter_000000010", "model.pt"));
    await writeTargets(session.targets, { only: ["model", "optim", "trainer", "data"] });
    const outcome = await manager.commitSave(session);
    expect(outcome.status).toBe("committed");
    const report = (outcome as { report: CommitReport }).report;
    expect(report).toMatchObject({
      kind: "full",
      iteration: 10,
      pointerAdvanced: true,
      validation: "none",
      upload: { status: "disabled" },
    });
    const description = await readFile(join(session.dir, CHECKPOINT_DESCRIPTION_FILE));
    expect(report.manifestSha256).toBe(sha256(description));
    const parsed = JSON.parse(description.toString()) as {
      physical_components: Array<{ name: string; size: number }>;
    };
    expect(parsed.physical_components.map((c) => c.name)).toEqual(["model", "optim", "trainer", "data"]);
    expect(await latestOf(manager.attemptDir)).toBe(10);
    expect(events.map((e) => e.type)).toContain("pointer");
  });

  it("refuses a commit whose component is missing and leaves the pointer where it was", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1 });
    await saveStep(manager, 1, { cadence: true });
    const plan = manager.planSave(2, { cadence: true })!;
    const session = await manager.beginSave(2, plan);
    await writeTargets(session.targets, { only: ["model", "trainer"] });
    await expect(manager.commitSave(session)).rejects.toMatchObject({ code: "MANAGER_COMPONENT_MISSING" });
    expect(await latestOf(manager.attemptDir)).toBe(1);
  });

  it("an interrupted save's leftover beyond the pointer is cleared before the step is saved again", async () => {
    const root = await tempRoot();
    const { manager, events } = await openManager(root, { ...sync, save_every: 1 });
    await saveStep(manager, 1, { cadence: true });
    const leftover = join(manager.attemptDir, "checkpoints", "iter_000000002");
    await mkdir(leftover, { recursive: true });
    await writeFile(join(leftover, "old.pt"), "from the interrupted save");
    const saved = committed(await saveStep(manager, 2, { cadence: true }));
    expect(await exists(join(leftover, "old.pt"))).toBe(false);
    expect(saved.pointerAdvanced).toBe(true);
    expect(events).toContainEqual({ type: "leftover_cleared", path: leftover });
  });

  it("a save interrupted after its description but before the pointer is redone (the pointer is the commit)", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1, keep_optim_last: 0 });
    await saveStep(manager, 1, { cadence: true });
    const saved = committed(await saveStep(manager, 2, { cadence: true }));
    // Roll the pointer back as if the process died between the description and the pointer.
    await writeFile(join(manager.attemptDir, "checkpoints", "latest_checkpoint.txt"), "iter_000000001");
    await manager.finalize();
    const { manager: resumed } = await openManager(root, { ...sync, save_every: 1, keep_optim_last: 0 });
    expect(await resumed.resolveResume()).toMatchObject({ iteration: 1 });
    const again = committed(await saveStep(resumed, 2, { cadence: true }));
    expect(again.dir).toBe(saved.dir);
    expect(await latestOf(manager.attemptDir)).toBe(2);
  });

  it("never rewrites a committed full checkpoint", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1, keep_optim_last: 0 });
    const first = await saveStep(manager, 3, { cadence: true });
    await expect(manager.beginSave(3, first!.plan)).rejects.toMatchObject({
      code: "MANAGER_CHECKPOINT_EXISTS",
    });
  });

  it("dcp format: model/ and optim/ directories are described file by file", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1, checkpoint_format: "dcp" });
    const saved = committed(await saveStep(manager, 1, { cadence: true }));
    const description = JSON.parse(await readFile(join(saved.dir, CHECKPOINT_DESCRIPTION_FILE), "utf8")) as {
      format: string;
      physical_components: Array<{ name: string; kind: string; files?: Array<{ path: string }> }>;
    };
    expect(description.format).toBe("dcp");
    expect(description.physical_components[0]).toMatchObject({ name: "model", kind: "dir" });
    expect(description.physical_components[0]!.files!.map((f) => f.path)).toEqual([
      ".metadata",
      "__0_0.distcp",
      "__1_0.distcp",
    ]);
  });

  describe("dcp format: a component is committed only when `verify` finds it complete", () => {
    const damaged: Array<[string, (dir: string) => Promise<unknown>, string, string]> = [
      ["without .metadata", (d) => rm(join(d, ".metadata")), "DCP_METADATA_UNREADABLE", "optim/.metadata"],
      [
        "with a rank's shard missing",
        (d) => rm(join(d, "__1_0.distcp")),
        "DCP_FILE_MISSING",
        "optim/__1_0.distcp",
      ],
      [
        "with a truncated shard",
        (d) => truncate(join(d, "__0_0.distcp"), 100),
        "DCP_FILE_SHORT",
        "optim/__0_0.distcp",
      ],
    ];
    for (const [what, damage, problem, file] of damaged) {
      it(`refuses optim/ ${what} (MANAGER_DCP_INCOMPLETE naming ${file}); no description, no pointer`, async () => {
        const root = await tempRoot();
        const { manager } = await openManager(root, { ...sync, save_every: 1, checkpoint_format: "dcp" });
        const plan = manager.planSave(1, { cadence: true })!;
        const session = await manager.beginSave(1, plan);
        await writeTargets(session.targets);
        await damage(session.targets.optim!);
        const error = (await manager.commitSave(session).catch((e: unknown) => e)) as ManagerError;
        expect(error).toBeInstanceOf(ManagerError);
        expect(error.code).toBe("MANAGER_DCP_INCOMPLETE");
        expect(error.kind).toBe("refused");
        expect(error.message).toContain(`${problem} ${file}`);
        expect(error.subject).toBe(join(session.dir, file));
        expect(await exists(join(session.dir, CHECKPOINT_DESCRIPTION_FILE))).toBe(false);
        expect(await exists(join(manager.attemptDir, "checkpoints", "latest_checkpoint.txt"))).toBe(false);
      });
    }
  });

  it("a session is committed once", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1 });
    const done = await saveStep(manager, 1, { cadence: true });
    await expect(manager.commitSave(done!.session)).rejects.toMatchObject({
      code: "MANAGER_SESSION_INVALID",
    });
  });
});

describe("partial plans: checkpoint_artifacts/iter_* (native manifest last, never latest, never re-committed)", () => {
  it("commits a model-only artifact without touching latest_checkpoint.txt", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 10,
      checkpoint_components: ["model"],
    });
    const saved = committed(await saveStep(manager, 10, { cadence: true }));
    expect(saved).toMatchObject({ kind: "artifact", pointerAdvanced: false });
    expect(saved.dir).toBe(join(manager.attemptDir, "checkpoint_artifacts", "iter_000000010"));
    const manifest = ARTIFACT_MANIFEST.parse(
      await readFile(join(saved.dir, ".posttrain-checkpoint-artifact.json")),
    );
    expect(manifest.logical_components).toEqual(["model"]);
    expect(manifest.physical_components.map((c) => c.name)).toEqual(["model"]);
    expect(await exists(join(manager.attemptDir, "checkpoints", "latest_checkpoint.txt"))).toBe(false);
  });

  it("a payload of a component outside the plan is left out of the manifest", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 10,
      checkpoint_components: ["model"],
    });
    const plan = manager.planSave(10, { cadence: true })!;
    const session = await manager.beginSave(10, plan);
    await writeTargets(session.targets);
    await writeFile(join(session.dir, "optim.pt"), "not planned");
    await manager.commitSave(session);
    const manifest = ARTIFACT_MANIFEST.parse(
      await readFile(join(session.dir, ".posttrain-checkpoint-artifact.json")),
    );
    expect(manifest.physical_components.map((c) => c.name)).toEqual(["model"]);
  });

  it("the step is covered afterwards, and saving into the committed artifact is refused", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 10,
      checkpoint_components: ["model"],
    });
    const first = await saveStep(manager, 10, { cadence: true });
    expect(manager.planSave(10, { final: true })).toBeUndefined();
    await expect(manager.beginSave(10, first!.plan)).rejects.toMatchObject({
      code: "MANAGER_ARTIFACT_COMMITTED",
    });
    const reopened = await openManager(root, {
      ...sync,
      save_every: 10,
      checkpoint_components: ["model"],
      resume: "auto",
    });
    expect(reopened.manager.planSave(10, { final: true })).toBeUndefined();
  });

  it("an active partial plan is announced as a warning when the manager opens", async () => {
    const root = await tempRoot();
    const { events } = await openManager(root, { ...sync, save_every: 10, checkpoint_components: ["model"] });
    expect(events.filter((e) => e.type === "warning")).toHaveLength(1);
  });
});

describe("resume resolution (local)", () => {
  it("auto: fresh when the attempt has no checkpoint", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, sync);
    expect(await manager.resolveResume()).toEqual({
      kind: "fresh",
      attemptDir: manager.attemptDir,
      reason: `no latest checkpoint in ${manager.attemptDir}: a fresh start`,
    });
  });

  it("auto: the latest complete checkpoint, with its component paths and manifest digest", async () => {
    const root = await tempRoot();
    const first = await openManager(root, { ...sync, save_every: 5 });
    await saveStep(first.manager, 5, { cadence: true });
    const saved = committed(await saveStep(first.manager, 10, { cadence: true }));
    await first.manager.finalize();
    const { manager } = await openManager(root, sync);
    const decision = await manager.resolveResume();
    expect(decision).toMatchObject({
      kind: "checkpoint",
      source: "auto",
      iteration: 10,
      format: "consolidated",
      manifestSha256: saved.manifestSha256,
      components: {
        model: join(saved.dir, "model.pt"),
        optim: join(saved.dir, "optim.pt"),
        trainer: join(saved.dir, "trainer.pt"),
      },
    });
    // The resumed step already has its checkpoint: a final save there is not written twice.
    expect(manager.planSave(10, { final: true })).toBeUndefined();
  });

  it("auto: a pointer naming a checkpoint whose file was truncated is refused as incomplete", async () => {
    const root = await tempRoot();
    const first = await openManager(root, { ...sync, save_every: 5 });
    const saved = committed(await saveStep(first.manager, 5, { cadence: true }));
    await writeFile(join(saved.dir, "model.pt"), "short");
    const { manager } = await openManager(root, sync);
    await expect(manager.resolveResume()).rejects.toMatchObject({ code: "MANAGER_RESUME_INCOMPLETE" });
  });

  it("auto: a damaged pointer never selects a resume", async () => {
    const root = await tempRoot();
    const first = await openManager(root, { ...sync, save_every: 5 });
    await saveStep(first.manager, 5, { cadence: true });
    await writeFile(
      join(first.manager.attemptDir, "checkpoints", "latest_checkpoint.txt"),
      "iter_5\niter_6\n",
    );
    const { manager } = await openManager(root, sync);
    await expect(manager.resolveResume()).rejects.toMatchObject({ code: "MANAGER_RESUME_POINTER_INVALID" });
  });

  it("no cold restart over an artifact: a model-only attempt is refused, naming the attempt and the remedies", async () => {
    const root = await tempRoot();
    const raw = { ...sync, save_every: 10, checkpoint_components: ["model"] };
    const first = await openManager(root, raw);
    await saveStep(first.manager, 10, { cadence: true });
    const { manager } = await openManager(root, raw);
    const error = (await manager.resolveResume().catch((e: unknown) => e)) as ManagerError;
    expect(error).toMatchObject({ code: "MANAGER_COLD_RESTART_OVER_ARTIFACT", kind: "refused" });
    expect(error.message).toContain(manager.attemptDir);
    expect(error.message).toContain("resume=off");
    expect(error.message).toContain("init_from");
  });

  it("an interrupted artifact without its manifest does not block a fresh start", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, sync);
    await mkdir(join(manager.attemptDir, "checkpoint_artifacts", "iter_000000010"), { recursive: true });
    await writeFile(
      join(manager.attemptDir, "checkpoint_artifacts", "iter_000000010", "model.pt"),
      "partial",
    );
    expect(await manager.resolveResume()).toMatchObject({ kind: "fresh" });
  });

  it("a full checkpoint behind the newest committed artifact is refused; at or beyond it resumes", async () => {
    const root = await tempRoot();
    const raw = {
      ...sync,
      save_every: 10,
      checkpoint_components: ["model"],
      validation: { save_checkpoint: true },
    };
    const first = await openManager(root, raw);
    // A full validation checkpoint at 5, then a model-only cadence artifact at 10.
    const pending = await saveStep(first.manager, 5, { validation: true });
    expect(pending?.plan.kind).toBe("full");
    await saveStep(first.manager, 10, { cadence: true });
    const behind = await openManager(root, raw);
    await expect(behind.manager.resolveResume()).rejects.toMatchObject({
      code: "MANAGER_RESUME_BEHIND_ARTIFACT",
    });
    await saveStep(behind.manager, 10, { validation: true }); // a full checkpoint at the artifact's iteration
    const { manager } = await openManager(root, raw);
    expect(await manager.resolveResume()).toMatchObject({ kind: "checkpoint", iteration: 10 });
  });

  it("explicit: must exist (never silently trains from scratch)", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, resume: join(root, "nope", "iter_000000001") });
    await expect(manager.resolveResume()).rejects.toMatchObject({
      code: "MANAGER_RESUME_NOT_FOUND",
      knob: "resume",
    });
  });

  it("explicit: an iter dir of another attempt resumes, pinned by its description's SHA-256", async () => {
    const root = await tempRoot();
    const clock = steppingClock(60_000);
    const source = await openManager(root, { ...sync, save_every: 5 }, { clock });
    const saved = committed(await saveStep(source.manager, 5, { cadence: true }));
    const pinned = await openManager(
      root,
      { ...sync, resume: saved.dir, resume_sha256: saved.manifestSha256 },
      { clock },
    );
    expect(await pinned.manager.resolveResume()).toMatchObject({
      kind: "checkpoint",
      source: "explicit",
      iteration: 5,
    });
    const wrong = await openManager(
      root,
      { ...sync, resume: saved.dir, resume_sha256: "0".repeat(64) },
      { clock },
    );
    await expect(wrong.manager.resolveResume()).rejects.toMatchObject({
      code: "MANAGER_RESUME_PIN_MISMATCH",
      knob: "resume_sha256",
    });
  });

  it("the description records every file's SHA-256; pinned or not, resume checks them as verify does", async () => {
    const root = await tempRoot();
    const source = await openManager(root, { ...sync, save_every: 5, checkpoint_format: "dcp" });
    const saved = committed(await saveStep(source.manager, 5, { cadence: true }));
    const description = JSON.parse(await readFile(join(saved.dir, CHECKPOINT_DESCRIPTION_FILE), "utf8")) as {
      physical_components: Array<{
        path: string;
        kind: string;
        sha256?: string;
        files?: Array<{ path: string; sha256?: string }>;
      }>;
    };
    const recorded = description.physical_components.flatMap((c) =>
      c.kind === "file" ? [[c.path, c.sha256]] : c.files!.map((f) => [`${c.path}/${f.path}`, f.sha256]),
    );
    expect(recorded.map(([path]) => path)).toEqual(expect.arrayContaining(["model/.metadata", "trainer.pt"]));
    for (const [path, digest] of recorded)
      expect(digest).toBe(sha256(await readFile(join(saved.dir, path!))));
    // Same size, other bytes: only a digest tells.
    const shard = join(saved.dir, "optim", "__0_0.distcp");
    const bytes = await readFile(shard);
    bytes[bytes.length - 1]! ^= 0xff;
    await writeFile(shard, bytes);
    for (const pin of [{}, { resume_sha256: saved.manifestSha256 }]) {
      const opened = await openManager(root, { ...sync, resume: saved.dir, ...pin });
      const error = (await opened.manager.resolveResume().catch((e: unknown) => e)) as ManagerError;
      expect(error.code).toBe("MANAGER_RESUME_IDENTITY_MISMATCH");
      expect(error.subject).toBe(shard);
      expect(error.message).toContain("VERIFY_DIGEST_MISMATCH optim/__0_0.distcp");
    }
  });

  it("the writer's inventory: its digests are recorded as given; a wrong size or an unsafe path is refused", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1, checkpoint_format: "dcp" });
    let step = 0;
    const written = async () => {
      step += 1;
      const session = await manager.beginSave(step, manager.planSave(step, { cadence: true })!);
      await writeTargets(session.targets);
      return session;
    };
    const size = (await readFile(join(DCP_FIXTURE, "__0_0.distcp"))).length;
    const claimed = "ab".repeat(32);
    for (const [entry, why] of [
      [
        { path: "model/__0_0.distcp", size: size + 1, sha256: claimed },
        `with ${size + 1} bytes, but it has ${size}`,
      ],
      [{ path: "../model/__0_0.distcp", size, sha256: claimed }, "which is not a safe relative path"],
      [{ path: "model/absent.distcp", size, sha256: claimed }, "which is not a regular file there"],
    ] as const) {
      const session = await written();
      const refused = (await manager
        .commitSave(session, { inventory: [entry] })
        .catch((e: unknown) => e)) as ManagerError;
      expect(refused.code).toBe("MANAGER_INVENTORY_INVALID");
      expect(refused.message).toContain(why);
    }
    const session = await written();
    const outcome = await manager.commitSave(session, {
      inventory: [{ path: "model/__0_0.distcp", size, sha256: claimed }],
    });
    expect(outcome.status).toBe("committed");
    const description = JSON.parse(
      await readFile(join(session.dir, CHECKPOINT_DESCRIPTION_FILE), "utf8"),
    ) as {
      physical_components: Array<{ name: string; files?: Array<{ path: string; sha256: string }> }>;
    };
    const model = description.physical_components.find((c) => c.name === "model")!;
    // The writer's digest, not a re-read (the bytes have another one); the unlisted shard was hashed.
    expect(model.files!.find((f) => f.path === "__0_0.distcp")!.sha256).toBe(claimed);
    expect(model.files!.find((f) => f.path === "__1_0.distcp")!.sha256).toBe(
      sha256(await readFile(join(session.dir, "model", "__1_0.distcp"))),
    );
  });

  it("explicit: a pin on a legacy directory without a manifest is refused", async () => {
    const root = await tempRoot();
    const legacy = join(root, "old", "iter_000000007");
    await writeLegacyDir(legacy);
    const ok = await openManager(root, { ...sync, resume: legacy });
    expect(await ok.manager.resolveResume()).toMatchObject({
      kind: "checkpoint",
      iteration: 7,
      format: "consolidated",
    });
    const pinned = await openManager(root, { ...sync, resume: legacy, resume_sha256: "a".repeat(64) });
    await expect(pinned.manager.resolveResume()).rejects.toMatchObject({
      code: "MANAGER_RESUME_PIN_UNAVAILABLE",
    });
  });

  it("explicit: a legacy directory whose optimizer state was pruned cannot be resumed", async () => {
    const root = await tempRoot();
    const legacy = join(root, "old", "iter_000000007");
    await writeTargets({ model: join(legacy, "model.pt"), trainer: join(legacy, "trainer.pt") });
    const { manager } = await openManager(root, { ...sync, resume: legacy });
    const error = (await manager.resolveResume().catch((e: unknown) => e)) as ManagerError;
    expect(error.code).toBe("MANAGER_RESUME_INCOMPLETE");
    expect(error.message).toContain("optimizer state");
  });

  it("explicit: a legacy single file is placed by its iter_* segment; pinned by the file's own digest", async () => {
    const root = await tempRoot();
    const file = join(root, "old", "iter_000000020", "state.pt");
    await writeTorchState(file);
    const { manager } = await openManager(root, {
      ...sync,
      resume: file,
      resume_sha256: sha256(await readFile(file)),
    });
    expect(await manager.resolveResume()).toMatchObject({
      kind: "checkpoint",
      iteration: 20,
      format: "legacy_file",
      legacyFile: file,
    });
  });

  it("explicit: behind the newest artifact, or with no derivable iteration, is refused", async () => {
    const root = await tempRoot();
    const raw = { ...sync, save_every: 10, checkpoint_components: ["model"] };
    const first = await openManager(root, raw);
    await saveStep(first.manager, 10, { cadence: true });
    const legacy = join(root, "elsewhere", "iter_000000005");
    await writeLegacyDir(legacy);
    const behind = await openManager(root, { ...raw, resume: legacy });
    await expect(behind.manager.resolveResume()).rejects.toMatchObject({
      code: "MANAGER_RESUME_BEHIND_ARTIFACT",
    });
    const unplaced = join(root, "elsewhere", "state.pt");
    await writeTorchState(unplaced, { epoch: 3 });
    const unknown = await openManager(root, { ...raw, resume: unplaced });
    await expect(unknown.manager.resolveResume()).rejects.toMatchObject({
      code: "MANAGER_RESUME_ITERATION_UNKNOWN",
    });
  });

  it("explicit: a legacy .pt that is not a readable torch.save zip is refused, nothing executed", async () => {
    const root = await tempRoot();
    const file = join(root, "old", "iter_000000020", "state.pt");
    await mkdir(join(root, "old", "iter_000000020"), { recursive: true });
    await writeFile(file, "legacy state bytes");
    const { manager } = await openManager(root, { ...sync, resume: file });
    const error = (await manager.resolveResume().catch((e: unknown) => e)) as ManagerError;
    expect(error.code).toBe("MANAGER_RESUME_UNREADABLE");
    expect(error.knob).toBe("resume");
    expect(error.message).toContain(file);
  });

  it("explicit: an undescribed directory whose files exist but are not torch.save zips is refused", async () => {
    const root = await tempRoot();
    const legacy = join(root, "old", "iter_000000007");
    await mkdir(legacy, { recursive: true });
    for (const name of ["model.pt", "optim.pt", "trainer.pt"]) await writeFile(join(legacy, name), "garbage");
    const garbage = await openManager(root, { ...sync, resume: legacy });
    const error = (await garbage.manager.resolveResume().catch((e: unknown) => e)) as ManagerError;
    expect(error.code).toBe("MANAGER_RESUME_UNREADABLE");
    expect(error.message).toContain("FILE_UNREADABLE model.pt");
    // One damaged component among sound ones is enough.
    await writeLegacyDir(legacy);
    await writeFile(join(legacy, "optim.pt"), "truncated");
    const one = await openManager(root, { ...sync, resume: legacy });
    await expect(one.manager.resolveResume()).rejects.toMatchObject({ code: "MANAGER_RESUME_UNREADABLE" });
    // A DCP directory without .metadata is not a DCP checkpoint.
    await rm(join(legacy, "optim.pt"));
    await mkdir(join(legacy, "optim"));
    await writeFile(join(legacy, "optim", "__0_0.distcp"), "shard");
    const dcp = await openManager(root, { ...sync, resume: legacy });
    await expect(dcp.manager.resolveResume()).rejects.toMatchObject({ code: "MANAGER_RESUME_INCOMPLETE" });
  });

  it("explicit: a checkpoint_artifacts/iter_* artifact is never a resume source (not 'incomplete')", async () => {
    const root = await tempRoot();
    const raw = { ...sync, save_every: 10, checkpoint_components: ["model"] };
    const first = await openManager(root, raw);
    const saved = committed(await saveStep(first.manager, 10, { cadence: true }));
    expect(saved.dir).toContain("checkpoint_artifacts");
    await first.manager.finalize();
    for (const resume of [saved.dir, join(saved.dir, "model.pt")]) {
      const { manager } = await openManager(root, { ...raw, resume });
      const error = (await manager.resolveResume().catch((e: unknown) => e)) as ManagerError;
      expect(error.code).toBe("MANAGER_RESUME_ARTIFACT_SOURCE");
      expect(error.message).toContain("never a resume source");
      await manager.finalize();
    }
    // A copy elsewhere is recognised by its artifact manifest.
    const copy = join(root, "copied", "iter_000000010");
    await mkdir(copy, { recursive: true });
    for (const name of await readdir(saved.dir))
      await writeFile(join(copy, name), await readFile(join(saved.dir, name)));
    const { manager } = await openManager(root, { ...raw, resume: copy });
    await expect(manager.resolveResume()).rejects.toMatchObject({ code: "MANAGER_RESUME_ARTIFACT_SOURCE" });
  });
});

describe("save_async: one in-flight write per role; the pointer moves only after a complete write", () => {
  it("returns once scheduled, commits after the trainer's write, and the next save joins it", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { save_async: true, save_every: 1 });
    const plan = manager.planSave(1, { cadence: true })!;
    const session = await manager.beginSave(1, plan);
    let finishWrite!: () => void;
    const written = new Promise<void>((resolve) => {
      finishWrite = resolve;
    });
    const outcome = await manager.commitSave(session, { written });
    expect(outcome.status).toBe("scheduled");
    // The trainer is still writing: nothing is committed yet.
    await writeTargets(session.targets, { only: ["model"] });
    expect(await exists(join(manager.attemptDir, "checkpoints", "latest_checkpoint.txt"))).toBe(false);
    const next = manager.beginSave(2, manager.planSave(2, { cadence: true })!);
    let joined = false;
    void next.then(() => {
      joined = true;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(joined).toBe(false);
    await writeTargets(session.targets, { only: ["optim", "trainer"] });
    finishWrite();
    const report = await (outcome as { completion: Promise<CommitReport> }).completion;
    expect(report.pointerAdvanced).toBe(true);
    await next;
    expect(await latestOf(manager.attemptDir)).toBe(1);
  });

  it("a failed background write leaves the last complete checkpoint as the resume source and surfaces at the next join", async () => {
    const root = await tempRoot();
    const { manager, events } = await openManager(root, { save_async: true, save_every: 1 });
    const first = await saveStep(manager, 1, { cadence: true });
    await (first!.outcome as { completion: Promise<CommitReport> }).completion;
    const session = await manager.beginSave(2, manager.planSave(2, { cadence: true })!);
    await writeTargets(session.targets, { only: ["model"] });
    const outcome = await manager.commitSave(session, { written: Promise.reject(new Error("disk full")) });
    await expect((outcome as { completion: Promise<CommitReport> }).completion).rejects.toMatchObject({
      code: "MANAGER_COMMIT_FAILED",
      message: expect.stringContaining("disk full"),
    });
    expect(await latestOf(manager.attemptDir)).toBe(1);
    await expect(manager.beginSave(3, manager.planSave(3, { cadence: true })!)).rejects.toMatchObject({
      code: "MANAGER_ASYNC_SAVE_FAILED",
    });
    expect(events.some((e) => e.type === "async_failed")).toBe(true);
  });

  it("finalize joins every in-flight commit", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { save_async: true, save_every: 1 });
    const session = await manager.beginSave(1, manager.planSave(1, { cadence: true })!);
    const written = new Promise<void>((resolve) => setTimeout(resolve, 100)).then(() =>
      writeTargets(session.targets),
    );
    await manager.commitSave(session, { written });
    await manager.finalize();
    expect(await latestOf(manager.attemptDir)).toBe(1);
    await expect(manager.beginSave(2, manager.planSave(2, { cadence: true })!)).rejects.toMatchObject({
      code: "MANAGER_FINALIZED",
    });
  });

  it("dcp bulk writes stay synchronous: a background `written` is refused", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      save_async: true,
      save_every: 1,
      checkpoint_format: "dcp",
    });
    const session = await manager.beginSave(1, manager.planSave(1, { cadence: true })!);
    await expect(manager.commitSave(session, { written: Promise.resolve() })).rejects.toMatchObject({
      code: "MANAGER_ASYNC_DCP_BULK",
    });
    // The refusal did not spend the session: committed synchronously, the same save goes through.
    await writeTargets(session.targets);
    expect((await manager.commitSave(session)).status).toBe("scheduled");
    await manager.finalize();
    expect(await latestOf(manager.attemptDir)).toBe(1);
  });
});

describe("retention after each save (in the save's write job)", () => {
  it("keep_model_last=2 keeps the newest two iteration directories; keep_optim_last=1 the newest optimizer state", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 1,
      keep_model_last: 2,
      keep_optim_last: 1,
    });
    for (let step = 1; step <= 4; step++) await saveStep(manager, step, { cadence: true });
    const dirs = (await readdir(join(manager.attemptDir, "checkpoints")))
      .filter((n) => n.startsWith("iter_"))
      .sort();
    expect(dirs).toEqual(["iter_000000003", "iter_000000004"]);
    expect(await exists(join(manager.attemptDir, "checkpoints", "iter_000000003", "optim.pt"))).toBe(false);
    expect(await exists(join(manager.attemptDir, "checkpoints", "iter_000000003", "model.pt"))).toBe(true);
    expect(await exists(join(manager.attemptDir, "checkpoints", "iter_000000004", "optim.pt"))).toBe(true);
  });

  it("the default keep_optim_last (null → 1) prunes optimizer state of older local checkpoints", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1 });
    for (let step = 1; step <= 3; step++) await saveStep(manager, step, { cadence: true });
    const optim = await Promise.all(
      [1, 2, 3].map((s) => exists(join(manager.attemptDir, "checkpoints", `iter_00000000${s}`, "optim.pt"))),
    );
    expect(optim).toEqual([false, false, true]);
  });

  it("artifacts are never counted or pruned by retention", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 1,
      keep_model_last: 1,
      validation: { save_checkpoint: true, checkpoint_components: ["model"] },
    });
    await saveStep(manager, 1, { validation: true });
    for (let step = 2; step <= 3; step++) await saveStep(manager, step, { cadence: true });
    expect(await exists(join(manager.attemptDir, "checkpoint_artifacts", "iter_000000001", "model.pt"))).toBe(
      true,
    );
  });

  it("upload-gated: with upload enabled, nothing unarchived is pruned", async () => {
    const root = await tempRoot();
    const unreachable = join(root, "no-such-dir-is-a-file");
    await writeFile(unreachable, "a file where the archive root should be");
    const { manager, events } = await openManager(root, {
      ...sync,
      save_every: 1,
      keep_model_last: 1,
      upload: { enabled: true, bucket: `file://${unreachable}` },
    });
    for (let step = 1; step <= 3; step++) {
      const saved = committed(await saveStep(manager, step, { cadence: true }));
      expect(saved.upload.status).toBe("failed");
    }
    const dirs = (await readdir(join(manager.attemptDir, "checkpoints"))).filter((n) =>
      n.startsWith("iter_"),
    );
    expect(dirs).toHaveLength(3);
    expect(events.filter((e) => e.type === "upload_failed")).toHaveLength(3);
  });
});

describe("archive upload (local primary + upload, file:// store)", () => {
  it("each completed full checkpoint is uploaded with a .uploaded receipt, then retention may prune it", async () => {
    const root = await tempRoot();
    const archive = join(root, "archive");
    await mkdir(archive);
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 1,
      keep_model_last: 1,
      upload: { enabled: true, bucket: `file://${archive}` },
    });
    const first = committed(await saveStep(manager, 1, { cadence: true }));
    expect(first.upload).toMatchObject({ status: "uploaded" });
    const prefix = join(archive, "proj", "grp", "run", manager.runTs, "checkpoints", "iter_000000001");
    expect(await readFile(join(prefix, "model.pt"))).toEqual(await readFile(join(first.dir, "model.pt")));
    const second = committed(await saveStep(manager, 2, { cadence: true }));
    expect(second.retention?.removed).toEqual(["iter_000000001"]);
    const receipt = JSON.parse(await readFile(join(second.dir, ".uploaded"), "utf8")) as {
      kind: string;
      files: Array<{ path: string; sha256?: string }>;
    };
    expect(receipt.kind).toBe("full_checkpoint");
    // Every payload is uploaded on the digest its commit recorded in the description.
    const description = JSON.parse(await readFile(join(second.dir, CHECKPOINT_DESCRIPTION_FILE), "utf8")) as {
      physical_components: Array<{ path: string; sha256?: string }>;
    };
    const recorded = description.physical_components.find((c) => c.path === "model.pt")?.sha256;
    expect(recorded).toBe(sha256(await readFile(join(second.dir, "model.pt"))));
    expect(receipt.files.find((f) => f.path === "model.pt")?.sha256).toBe(recorded);
    expect(receipt.files.find((f) => f.path === "trainer.pt")?.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("a payload changed after its commit is refused before the receipt: the publication fails", async () => {
    const root = await tempRoot();
    const archive = join(root, "archive");
    await mkdir(archive);
    const { manager } = await openManager(root, {
      ...sync,
      validation: { save_checkpoint: true },
      upload: { enabled: true, bucket: `file://${archive}` },
    });
    const saved = committed(await saveStep(manager, 5, { validation: true }));
    const model = join(saved.dir, "model.pt");
    const bytes = await readFile(model);
    bytes[bytes.length >> 1]! ^= 1;
    await writeFile(model, bytes);
    await expect(manager.completeValidation(5)).rejects.toMatchObject({
      code: "MANAGER_PUBLICATION_FAILED",
      message: expect.stringContaining("does not hold the bytes its checkpoint description records"),
    });
    expect(await exists(join(saved.dir, ".uploaded"))).toBe(false);
    const prefix = join(archive, "proj", "grp", "run", manager.runTs, "checkpoints", "iter_000000005");
    expect(await exists(join(prefix, "model.pt"))).toBe(false);
  });

  it("a partial artifact is published through the same operation as `ckpt artifact publish`", async () => {
    const root = await tempRoot();
    const archive = join(root, "archive");
    await mkdir(archive);
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 1,
      checkpoint_components: ["model"],
      upload: { enabled: true, bucket: `file://${archive}` },
    });
    const saved = committed(await saveStep(manager, 1, { cadence: true }));
    expect(saved.upload.status).toBe("uploaded");
    const remote = join(
      archive,
      "proj",
      "grp",
      "run",
      manager.runTs,
      "checkpoint_artifacts",
      "iter_000000001",
    );
    const names = (await readdir(remote)).filter((n) => n !== ".ckpt-meta"); // the file store's metadata sidecar
    expect(names.sort()).toEqual([
      ".posttrain-archive.json",
      ".posttrain-checkpoint-artifact.json",
      "model.pt",
    ]);
    const receipt = JSON.parse(await readFile(join(saved.dir, ".uploaded"), "utf8")) as { kind: string };
    expect(receipt.kind).toBe("artifact");
  });
});

describe("validation transaction (evaluation-pending → publication-pending → published)", () => {
  it("a full validation save advances resume but is not archived or retained until published", async () => {
    const root = await tempRoot();
    const archive = join(root, "archive");
    await mkdir(archive);
    const raw = {
      ...sync,
      save_every: 10,
      keep_model_last: 1,
      validation: { save_checkpoint: true },
      upload: { enabled: true, bucket: `file://${archive}` },
    };
    const { manager, events } = await openManager(root, raw);
    await saveStep(manager, 3, { cadence: false, final: false, validation: false, emergency: true });
    const saved = committed(await saveStep(manager, 5, { validation: true }));
    expect(saved).toMatchObject({
      validation: "evaluation_pending",
      pointerAdvanced: true,
      upload: { status: "deferred" },
    });
    expect(saved.retention).toBeUndefined();
    expect(await latestOf(manager.attemptDir)).toBe(5);
    expect(JSON.parse(await readFile(join(saved.dir, VALIDATION_STATE_FILE), "utf8")).state).toBe(
      "evaluation_pending",
    );
    // A resume (the next run, after this one exited) re-runs validation, then completes it.
    const states = (list: typeof events) =>
      list.filter((e) => e.type === "validation").map((e) => (e as { state: string }).state);
    expect(states(events)).toEqual(["evaluation_pending"]);
    const resumed = await openManager(root, raw);
    expect(await resumed.manager.resolveResume()).toMatchObject({
      iteration: 5,
      validation: "evaluation_pending",
    });
    const published = await resumed.manager.completeValidation(5);
    expect(published).toMatchObject({ state: "published", upload: { status: "uploaded" } });
    expect(published.retention?.removed).toEqual(["iter_000000003"]);
    expect(states(resumed.events)).toEqual(["publication_pending", "published"]);
    const after = await openManager(root, raw);
    const decision = await after.manager.resolveResume();
    expect(decision).toMatchObject({ iteration: 5 });
    expect("validation" in decision).toBe(false);
  });

  it("a failed strict publication stays publication-pending; a resume retries only the publication", async () => {
    const root = await tempRoot();
    const blocked = join(root, "blocked");
    await writeFile(blocked, "a file where the archive root should be");
    const { manager } = await openManager(root, {
      ...sync,
      validation: { save_checkpoint: true },
      upload: { enabled: true, bucket: `file://${blocked}` },
    });
    await saveStep(manager, 5, { validation: true });
    await expect(manager.completeValidation(5)).rejects.toMatchObject({ code: "MANAGER_PUBLICATION_FAILED" });
    await manager.finalize();
    const archive = join(root, "archive");
    await mkdir(archive);
    const { manager: resumed } = await openManager(root, {
      ...sync,
      validation: { save_checkpoint: true },
      upload: { enabled: true, bucket: `file://${archive}` },
    });
    expect(await resumed.resolveResume()).toMatchObject({ iteration: 5, validation: "publication_pending" });
    expect(await resumed.completeValidation(5)).toMatchObject({
      state: "published",
      upload: { status: "uploaded" },
    });
  });

  it("completing validation of a checkpoint without a transaction is refused", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1 });
    await saveStep(manager, 1, { cadence: true });
    await expect(manager.completeValidation(1)).rejects.toMatchObject({ code: "MANAGER_VALIDATION_STATE" });
  });
});

describe("multi-role boundary (policy/ and critic/ with _SUCCESS)", () => {
  const raw = { ...sync, save_every: 1, roles: ["policy", "critic"] };

  it("writes each role's sub-checkpoint, then _SUCCESS with each role's optimizer counter and loop_state, then latest", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, raw);
    const session = await manager.beginSave(12, manager.planSave(12, { cadence: true })!);
    expect(session.roles?.policy?.model).toBe(join(session.dir, "policy", "model.pt"));
    for (const role of ["policy", "critic"]) await writeTargets(session.roles![role]!);
    await expect(
      manager.commitSave(session, { roles: { policy: { optimizerStep: 7 } } }),
    ).rejects.toMatchObject({
      code: "MANAGER_ROLES_MISMATCH",
    });
    // A usage refusal leaves the session open: the same write is committed with the right arguments.
    const session2 = session;
    const outcome = await manager.commitSave(session2, {
      roles: { policy: { optimizerStep: 7 }, critic: { optimizerStep: 12 } },
      loopState: { critic_warmup_iterations: 5 },
    });
    expect(outcome.status).toBe("committed");
    const marker = JSON.parse(await readFile(join(session2.dir, "_SUCCESS"), "utf8"));
    expect(marker).toMatchObject({
      iteration: 12,
      roles: { policy: { optimizer_step: 7 }, critic: { optimizer_step: 12 } },
      loop_state: { critic_warmup_iterations: 5 },
    });
    const { manager: resumed } = await openManager(root, raw);
    const decision = await resumed.resolveResume();
    expect(decision).toMatchObject({
      kind: "checkpoint",
      iteration: 12,
      roles: { policy: { optimizerStep: 7 }, critic: { optimizerStep: 12 } },
      loopState: { critic_warmup_iterations: 5 },
    });
    if (decision.kind !== "checkpoint") throw new Error("unreachable");
    expect(decision.roles?.critic?.components.optim).toBe(join(session2.dir, "critic", "optim.pt"));
    expect(decision.manifestSha256).toBe(sha256(await readFile(join(session2.dir, "_SUCCESS"))));
  });

  async function saveBoundary(manager: Awaited<ReturnType<typeof openManager>>["manager"], step: number) {
    const session = await manager.beginSave(step, manager.planSave(step, { cadence: true })!);
    for (const role of ["policy", "critic"]) await writeTargets(session.roles![role]!);
    return manager.commitSave(session, {
      roles: { policy: { optimizerStep: step }, critic: { optimizerStep: step * 2 } },
    });
  }

  it("keep_optim_last applies per role: each role keeps its optimizer state in the newest N boundaries only", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...raw, keep_optim_last: 2 });
    for (let step = 1; step <= 4; step++) await saveBoundary(manager, step);
    const iter = (step: number) => join(manager.attemptDir, "checkpoints", `iter_00000000${step}`);
    for (const role of ["policy", "critic"]) {
      const optim = await Promise.all([1, 2, 3, 4].map((s) => exists(join(iter(s), role, "optim.pt"))));
      expect(optim).toEqual([false, false, true, true]);
      // Weights, trainer state and the boundary marker stay for every iteration.
      for (const s of [1, 2, 3, 4]) {
        expect(await exists(join(iter(s), role, "model.pt"))).toBe(true);
        expect(await exists(join(iter(s), role, "trainer.pt"))).toBe(true);
        expect(await exists(join(iter(s), "_SUCCESS"))).toBe(true);
      }
    }
    // The pruned boundary is no longer an exact-resume source; the latest still is.
    const old = await openManager(root, { ...raw, resume: iter(1) });
    await expect(old.manager.resolveResume()).rejects.toMatchObject({ code: "MANAGER_RESUME_INCOMPLETE" });
    const auto = await openManager(root, raw);
    expect(await auto.manager.resolveResume()).toMatchObject({ kind: "checkpoint", iteration: 4 });
  });

  it("the default keep_optim_last (null → 1) prunes every role's optimizer (file or DCP directory) but the newest", async () => {
    const root = await tempRoot();
    const { manager, events } = await openManager(root, { ...raw, checkpoint_format: "dcp" });
    for (let step = 1; step <= 3; step++) await saveBoundary(manager, step);
    const iter = (step: number) => join(manager.attemptDir, "checkpoints", `iter_00000000${step}`);
    for (const role of ["policy", "critic"]) {
      const optim = await Promise.all([1, 2, 3].map((s) => exists(join(iter(s), role, "optim"))));
      expect(optim).toEqual([false, false, true]);
      expect(await exists(join(iter(1), role, "model", ".metadata"))).toBe(true);
    }
    const removed = events.flatMap((e) => (e.type === "retention" ? e.outcome.removed : []));
    expect(removed).toContain("iter_000000001/critic/optim");
  });

  it("resume sees the boundary only when complete: a role missing its optimizer fails the commit, no _SUCCESS, no pointer", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, raw);
    const session = await manager.beginSave(1, manager.planSave(1, { cadence: true })!);
    await writeTargets(session.roles!.policy!);
    await writeTargets(session.roles!.critic!, { only: ["model", "trainer"] });
    await expect(
      manager.commitSave(session, { roles: { policy: { optimizerStep: 1 }, critic: { optimizerStep: 1 } } }),
    ).rejects.toMatchObject({ code: "MANAGER_COMPONENT_MISSING" });
    expect(await exists(join(session.dir, "_SUCCESS"))).toBe(false);
    expect(await exists(join(manager.attemptDir, "checkpoints", "latest_checkpoint.txt"))).toBe(false);
  });
});

describe("termination watch", () => {
  it("sees the sentinel file touched after start, not one left by a previous window", async () => {
    const root = await tempRoot();
    const sentinel = join(root, "SIGUSR1_RECEIVED");
    await writeFile(sentinel, "");
    await utimes(sentinel, new Date(1_000_000), new Date(1_000_000));
    const { manager, events } = await openManager(root, sync, {
      termination: { signals: false, sentinelPath: sentinel },
    });
    expect(manager.stopRequested()).toBeUndefined();
    await utimes(sentinel, new Date(), new Date());
    expect(manager.stopRequested()).toEqual({ kind: "sentinel", path: sentinel });
    expect(events).toContainEqual({ type: "stop_requested", reason: { kind: "sentinel", path: sentinel } });
  });

  it("defaults to $SLURM_LOG_DIR/SIGUSR1_RECEIVED", async () => {
    const root = await tempRoot();
    const previous = process.env.SLURM_LOG_DIR;
    process.env.SLURM_LOG_DIR = root;
    try {
      const { manager } = await openManager(root, sync, { termination: { signals: false } });
      await writeFile(join(root, "SIGUSR1_RECEIVED"), "");
      expect(manager.stopRequested()).toEqual({ kind: "sentinel", path: join(root, "SIGUSR1_RECEIVED") });
    } finally {
      if (previous === undefined) delete process.env.SLURM_LOG_DIR;
      else process.env.SLURM_LOG_DIR = previous;
    }
  });

  it("SIGUSR1 and SIGTERM only set a flag; finalize removes the handlers", async () => {
    const root = await tempRoot();
    const before = process.listenerCount("SIGTERM");
    const { manager } = await openManager(root, sync, { termination: { signals: true, sentinelPath: null } });
    expect(process.listenerCount("SIGTERM")).toBe(before + 1);
    process.kill(process.pid, "SIGTERM");
    await new Promise((r) => setTimeout(r, 50));
    expect(manager.stopRequested()).toEqual({ kind: "signal", signal: "SIGTERM" });
    await manager.finalize();
    expect(process.listenerCount("SIGTERM")).toBe(before);
  });

  it("an emergency save at the boundary writes the full plan and the loop exits cleanly", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, {
      ...sync,
      save_every: 100,
      checkpoint_components: ["model"],
    });
    const saved = committed(await saveStep(manager, 37, { emergency: true }));
    expect(saved).toMatchObject({ kind: "full", pointerAdvanced: true });
    await manager.finalize();
    const { manager: requeued } = await openManager(root, {
      ...sync,
      save_every: 100,
      checkpoint_components: ["model"],
    });
    expect(await requeued.resolveResume()).toMatchObject({ kind: "checkpoint", iteration: 37 });
  });
});

describe("housekeeping", () => {
  it("removes its staging of nothing and leaves foreign files in an artifact directory alone", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(root, { ...sync, save_every: 1, checkpoint_components: ["model"] });
    const dir = join(manager.attemptDir, "checkpoint_artifacts", "iter_000000001");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "notes.txt"), "someone else's");
    await writeFile(join(dir, "model.pt"), "interrupted");
    await saveStep(manager, 1, { cadence: true });
    expect(await readFile(join(dir, "notes.txt"), "utf8")).toBe("someone else's");
    await rm(dir, { recursive: true });
  });
});
