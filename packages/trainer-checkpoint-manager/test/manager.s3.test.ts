// @module-tag s3
// The direct object-store primary, the writer lease and archive upload against the real S3 server
// (Ceph RGW, tools/test-utils' global setup). Each test works under its own project prefix.
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { CONTROL_MANIFEST, type ControlManifest, sha256Hex } from "@ckpt/manifest";
import { copyPrefix, type ObjectStore, openStore } from "@ckpt/object-store";
import { createTestBucket, s3TestEnv, testCredentials } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CheckpointManager, CommitReport, ComponentTargets, SaveSession } from "../src/index.js";
import { openManager, steppingClock, tempRoot } from "./helpers.js";

let bucket = "";
let cleanup: () => Promise<void> = async () => {};
const credentials = () => testCredentials(s3TestEnv());

beforeAll(async () => {
  ({ bucket, cleanup } = await createTestBucket(s3TestEnv(), "manager"));
});
afterAll(async () => {
  await cleanup();
});

const store = (uri: string): Promise<ObjectStore> =>
  openStore(uri.replace(/\/+$/, ""), { credentials: credentials() });

async function readObject(s: ObjectStore, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await s.get(key)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

type Inventory = Array<{ path: string; size: number; sha256: string }>;

/**
 * What the trainer's ranks do: DCP shards and `.metadata` in place, trainer.pt staged locally.
 * Returns what a hashing writer would report: each uploaded file, relative to the save directory.
 */
async function writeDirect(
  targets: ComponentTargets,
  dcp: ReadonlyArray<"model" | "optim" | "old"> = ["model", "optim"],
): Promise<Inventory> {
  const inventory: Inventory = [];
  for (const name of dcp) {
    const target = targets[name];
    if (target === undefined) continue;
    const s = await store(target);
    for (const [file, bytes] of [
      ["__0_0.distcp", randomBytes(2048)],
      [".metadata", Buffer.from(`dcp metadata of ${name}`)],
    ] as const) {
      await s.put(file, bytes);
      inventory.push({ path: `${name}/${file}`, size: bytes.byteLength, sha256: sha256Hex(bytes) });
    }
  }
  if (targets.trainer !== undefined) {
    await mkdir(dirname(targets.trainer), { recursive: true });
    await writeFile(targets.trainer, `trainer state ${targets.trainer}`);
  }
  return inventory;
}

const directConfig = (extra: Record<string, unknown> = {}) => ({
  checkpoint_format: "dcp",
  save_every: 1,
  checkpoint_store: { backend: "object_store", bucket },
  ...extra,
});

async function openDirect(
  root: string,
  project: string,
  extra: Record<string, unknown> = {},
  options: Parameters<typeof openManager>[2] = {},
) {
  return openManager(root, directConfig(extra), { project, credentials: credentials(), ...options });
}

async function save(
  manager: CheckpointManager,
  step: number,
  due = { cadence: true },
  dcp?: ReadonlyArray<"model" | "optim" | "old">,
) {
  const plan = manager.planSave(step, due)!;
  const session: SaveSession = await manager.beginSave(step, plan);
  if (!session.alreadyCommitted) await writeDirect(session.targets, dcp);
  const outcome = await manager.commitSave(session);
  if (outcome.status !== "committed") throw new Error(`expected committed, got ${outcome.status}`);
  return { session, report: outcome.report as CommitReport };
}

describe("direct object-store primary (real S3)", () => {
  it("commits DCP in place, an append-only control generation, the control manifest, then latest_checkpoint.txt; resumes in place", async () => {
    const root = await tempRoot();
    const { manager } = await openDirect(root, "direct-a");
    expect(manager.checkpointsRoot).toBe(`s3://${bucket}/direct-a/grp/run/${manager.runTs}/checkpoints`);
    const { session, report } = await save(manager, 1);
    expect(session.targets.model).toBe(`${manager.checkpointsRoot}/iter_000000001/model/`);
    const rootStore = await store(manager.checkpointsRoot);
    expect((await readObject(rootStore, "latest_checkpoint.txt")).toString()).toBe("iter_000000001");
    const manifestBytes = await readObject(rootStore, "iter_000000001/.posttrain-manifest.json");
    expect(report.manifestSha256).toBe(sha256Hex(manifestBytes));
    const manifest = CONTROL_MANIFEST.parse(manifestBytes);
    expect(manifest.components).toEqual(["model", "optim"]);
    expect(manifest.control.trainer.path).toBe(
      `.posttrain/generations/${manifest.control_generation}/trainer.pt`,
    );
    await manager.finalize();

    const { manager: resumed } = await openDirect(root, "direct-a");
    const decision = await resumed.resolveResume();
    expect(decision).toMatchObject({
      kind: "checkpoint",
      iteration: 1,
      format: "dcp",
      manifestSha256: report.manifestSha256,
      components: {
        model: `${manager.checkpointsRoot}/iter_000000001/model/`,
        optim: `${manager.checkpointsRoot}/iter_000000001/optim/`,
      },
    });
    if (decision.kind !== "checkpoint") throw new Error("unreachable");
    expect(await readFile(decision.components.trainer!, "utf8")).toBe(
      `trainer state ${session.targets.trainer}`,
    );
  });

  it("commit refuses a DCP component whose .metadata was not finalized", async () => {
    const root = await tempRoot();
    const { manager } = await openDirect(root, "direct-b");
    const session = await manager.beginSave(1, manager.planSave(1, { cadence: true })!);
    await writeDirect(session.targets, ["model"]);
    await expect(manager.commitSave(session)).rejects.toMatchObject({ code: "MANAGER_COMPONENT_MISSING" });
    expect(await (await store(manager.checkpointsRoot)).head("latest_checkpoint.txt")).toBeUndefined();
  });

  it("a same-iteration retry under a visible manifest only confirms the pointer (an ambiguous latest PUT)", async () => {
    const root = await tempRoot();
    const { manager } = await openDirect(root, "direct-c");
    await save(manager, 1);
    const second = await save(manager, 2);
    const rootStore = await store(manager.checkpointsRoot);
    const manifestBefore = await readObject(rootStore, "iter_000000002/.posttrain-manifest.json");
    // The PUT of latest for iteration 2 "failed" as far as the writer knew: the pointer still says 1.
    await rootStore.put("latest_checkpoint.txt", Buffer.from("iter_000000001"));
    await manager.finalize();
    const { manager: retry } = await openDirect(root, "direct-c");
    expect(await retry.resolveResume()).toMatchObject({ iteration: 1 });
    const session = await retry.beginSave(2, retry.planSave(2, { cadence: true })!);
    expect(session.alreadyCommitted).toBe(true);
    const outcome = await retry.commitSave(session);
    expect(outcome).toMatchObject({
      status: "committed",
      report: { manifestSha256: second.report.manifestSha256, pointerAdvanced: true },
    });
    expect((await readObject(rootStore, "latest_checkpoint.txt")).toString()).toBe("iter_000000002");
    expect(await readObject(rootStore, "iter_000000002/.posttrain-manifest.json")).toEqual(manifestBefore);
  });

  it("plan drift fails closed: a manifest recording other components keeps the iteration", async () => {
    const root = await tempRoot();
    const { manager } = await openDirect(root, "direct-d");
    await save(manager, 1);
    const session = await manager.beginSave(2, manager.planSave(2, { cadence: true })!);
    await writeDirect(session.targets, ["model", "optim", "old"]);
    const rootStore = await store(manager.checkpointsRoot);
    const trainer = Buffer.from("someone else's trainer state");
    const other: ControlManifest = {
      schema: CONTROL_MANIFEST.version,
      iteration: 2,
      components: ["model", "optim"],
      control_generation: "gother",
      control: {
        trainer: {
          path: ".posttrain/generations/gother/trainer.pt",
          size: trainer.length,
          sha256: sha256Hex(trainer),
        },
        data: null,
      },
      validation_publication: null,
    };
    await rootStore.put("iter_000000002/.posttrain/generations/gother/trainer.pt", trainer);
    await rootStore.put("iter_000000002/.posttrain-manifest.json", CONTROL_MANIFEST.serialize(other));
    await expect(manager.commitSave(session)).rejects.toMatchObject({ code: "MANAGER_PLAN_DRIFT" });
    expect((await readObject(rootStore, "latest_checkpoint.txt")).toString()).toBe("iter_000000001");
  });

  it("explicit s3://…/iter_* resume of a complete copy elsewhere (relative control descriptors), pinned by its manifest", async () => {
    const root = await tempRoot();
    const { manager } = await openDirect(root, "direct-e");
    const { report } = await save(manager, 3);
    await manager.finalize();
    const copy = `s3://${bucket}/direct-e-copy/iter_000000003`;
    await copyPrefix(await store(`${manager.checkpointsRoot}/iter_000000003`), await store(copy));
    const { manager: other } = await openDirect(root, "direct-e2", {
      resume: copy,
      resume_sha256: report.manifestSha256,
    });
    expect(await other.resolveResume()).toMatchObject({
      kind: "checkpoint",
      source: "explicit",
      iteration: 3,
      iterDir: copy,
    });
  });

  it("explicit resume of a half-written iteration (no control manifest) fails", async () => {
    const root = await tempRoot();
    const half = `s3://${bucket}/direct-f/checkpoints/iter_000000009`;
    await writeDirect({ model: `${half}/model/` }, ["model"]);
    const { manager } = await openDirect(root, "direct-f2", { resume: half });
    await expect(manager.resolveResume()).rejects.toMatchObject({ code: "MANAGER_RESUME_INCOMPLETE" });
  });

  it("validation transaction: the pending checkpoint advances resume; publication appends records and successor manifests", async () => {
    const root = await tempRoot();
    const extra = { validation: { save_checkpoint: true } };
    const { manager } = await openDirect(root, "direct-g", extra);
    const { report } = await save(manager, 4, { validation: true } as never);
    expect(report.validation).toBe("evaluation_pending");
    await manager.finalize();
    const { manager: resumed } = await openDirect(root, "direct-g", extra);
    expect(await resumed.resolveResume()).toMatchObject({ iteration: 4, validation: "evaluation_pending" });
    expect(await resumed.completeValidation(4)).toMatchObject({ state: "published" });
    const rootStore = await store(resumed.checkpointsRoot);
    const manifest = CONTROL_MANIFEST.parse(
      await readObject(rootStore, "iter_000000004/.posttrain-manifest.json"),
    );
    expect(manifest.validation_publication).toBe(".validation-publication-3-published.json");
    for (const name of [
      ".validation-publication-1-evaluation_pending.json",
      ".validation-publication-2-publication_pending.json",
    ]) {
      expect(await rootStore.head(`iter_000000004/${name}`)).toBeDefined();
    }
    await resumed.finalize();
    const { manager: after } = await openDirect(root, "direct-g", extra);
    expect(await after.resolveResume()).not.toHaveProperty("validation");
  });

  it("a partial plan commits a remote artifact in the sibling prefix; no cold restart over it", async () => {
    const root = await tempRoot();
    const extra = { checkpoint_components: ["model"] };
    const { manager } = await openDirect(root, "direct-h", extra);
    const { report, session } = await save(manager, 5, { cadence: true }, ["model"]);
    expect(report.kind).toBe("artifact");
    expect(session.dir).toBe(
      `s3://${bucket}/direct-h/grp/run/${manager.runTs}/checkpoint_artifacts/iter_000000005`,
    );
    const artifacts = await store(dirname(session.dir));
    const manifest = JSON.parse(
      (await readObject(artifacts, "iter_000000005/.posttrain-checkpoint-artifact.json")).toString(),
    );
    expect(manifest).toMatchObject({ format: "dcp", logical_components: ["model"] });
    await manager.finalize();
    const { manager: again } = await openDirect(root, "direct-h", extra);
    await expect(again.resolveResume()).rejects.toMatchObject({ code: "MANAGER_COLD_RESTART_OVER_ARTIFACT" });
  });
});

describe("direct primary: the writer's digests bound in the records", () => {
  it("a full checkpoint's generation holds its description with every shard's digest; resume refuses a shard of another size", async () => {
    const root = await tempRoot();
    const { manager } = await openDirect(root, "direct-d1");
    const plan = manager.planSave(1, { cadence: true })!;
    const session = await manager.beginSave(1, plan);
    // A leftover of an interrupted earlier try that this save did not write: not described.
    await (await store(session.targets.model!)).put("__9_0.distcp", randomBytes(16));
    const inventory = await writeDirect(session.targets);
    const outcome = await manager.commitSave(session, { inventory });
    expect(outcome.status).toBe("committed");
    await manager.finalize();
    const rootStore = await store(manager.checkpointsRoot);
    const manifest = CONTROL_MANIFEST.parse(
      await readObject(rootStore, "iter_000000001/.posttrain-manifest.json"),
    );
    const description = JSON.parse(
      (
        await readObject(
          rootStore,
          `iter_000000001/.posttrain/generations/${manifest.control_generation}/.posttrain-checkpoint.json`,
        )
      ).toString(),
    );
    const model = description.physical_components.find((c: { name: string }) => c.name === "model");
    expect(model.files).toEqual(
      inventory
        .filter((e) => e.path.startsWith("model/"))
        .map((e) => ({ ...e, path: e.path.slice(6) }))
        .sort((a, b) => (a.path < b.path ? -1 : 1)),
    );

    const { manager: resumed } = await openDirect(root, "direct-d1");
    const decision = await resumed.resolveResume();
    if (decision.kind !== "checkpoint") throw new Error(`expected a checkpoint, got ${decision.reason}`);
    // The description is handed to the reader beside trainer.pt.
    const cached = await readFile(join(dirname(decision.components.trainer!), ".posttrain-checkpoint.json"));
    expect(JSON.parse(cached.toString())).toEqual(description);
    await resumed.finalize();

    await rootStore.put("iter_000000001/optim/__0_0.distcp", randomBytes(100));
    const { manager: damaged } = await openDirect(root, "direct-d1");
    await expect(damaged.resolveResume()).rejects.toMatchObject({
      message: expect.stringContaining("optim/__0_0.distcp has 100 bytes, described 2048"),
    });
  });

  it("refuses an inventory naming a shard the store does not hold, before any control write", async () => {
    const root = await tempRoot();
    const { manager } = await openDirect(root, "direct-d2");
    const plan = manager.planSave(1, { cadence: true })!;
    const session = await manager.beginSave(1, plan);
    const inventory = await writeDirect(session.targets);
    const missing = { path: "model/__1_0.distcp", size: 5, sha256: "a".repeat(64) };
    await expect(manager.commitSave(session, { inventory: [...inventory, missing] })).rejects.toMatchObject({
      code: "MANAGER_INVENTORY_INVALID",
    });
    const rootStore = await store(manager.checkpointsRoot);
    expect(await rootStore.head("iter_000000001/.posttrain-manifest.json")).toBeUndefined();
  });

  it("a direct artifact written with digests carries the archive declaration binding its manifest", async () => {
    const root = await tempRoot();
    const extra = { checkpoint_components: ["model"] };
    const { manager } = await openDirect(root, "direct-d3", extra);
    const plan = manager.planSave(5, { cadence: true })!;
    const session = await manager.beginSave(5, plan);
    const inventory = await writeDirect(session.targets, ["model"]);
    await manager.commitSave(session, { inventory });
    const artifacts = await store(session.dir);
    const manifestBytes = await readObject(artifacts, ".posttrain-checkpoint-artifact.json");
    const declaration = JSON.parse((await readObject(artifacts, ".posttrain-archive.json")).toString());
    expect(declaration).toMatchObject({
      schema: "posttrain.artifact-archive.v1",
      manifest_sha256: sha256Hex(manifestBytes),
      manifest_size: manifestBytes.byteLength,
    });
    expect(declaration.files.map((f: { path: string }) => f.path)).toEqual([
      ".posttrain-checkpoint-artifact.json",
      "model/.metadata",
      "model/__0_0.distcp",
    ]);
    await manager.finalize();
  });
});

describe("writer lease on a direct-primary root (beyond the seed)", () => {
  it("a second writer on the same root is refused by name; after a clean finalize it may start", async () => {
    const root = await tempRoot();
    const clock = steppingClock(1000);
    const first = await openDirect(root, "lease-a", {}, { clock, runTs: "20260901120000" });
    const error = await openDirect(root, "lease-a", {}, { clock, runTs: "20260901120000" }).catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: "MANAGER_LEASE_HELD", kind: "refused" });
    expect((error as Error).message).toContain(`pid ${process.pid}`);
    expect((error as Error).message).toContain("20260901120000");
    await first.manager.finalize();
    const second = await openDirect(root, "lease-a", {}, { clock, runTs: "20260901120000" });
    expect(second.events).toContainEqual({
      type: "lease",
      action: "acquired",
      key: ".posttrain-lease/epoch-000000000002.json",
    });
  });

  it("an expired lease is taken over; the old writer's next commit fails with MANAGER_LEASE_LOST", async () => {
    const root = await tempRoot();
    const start = Date.UTC(2026, 8, 1, 12, 0, 0);
    const old = await openDirect(
      root,
      "lease-b",
      { checkpoint_store: { backend: "object_store", bucket, lease_seconds: 60 } },
      {
        clock: () => new Date(start),
        runTs: "20260901120000",
      },
    );
    const later = await openDirect(
      root,
      "lease-b",
      { checkpoint_store: { backend: "object_store", bucket, lease_seconds: 60 } },
      {
        clock: () => new Date(start + 61_000),
        runTs: "20260901120000",
      },
    );
    expect(later.events.some((e) => e.type === "lease" && e.action === "acquired")).toBe(true);
    const session = await old.manager.beginSave(1, old.manager.planSave(1, { cadence: true })!);
    await writeDirect(session.targets);
    await expect(old.manager.commitSave(session)).rejects.toMatchObject({ code: "MANAGER_LEASE_LOST" });
    expect(old.events.some((e) => e.type === "lease" && e.action === "lost")).toBe(true);
    // The new holder commits normally.
    await save(later.manager, 1);
  });
});

describe("local primary with archive upload to real S3", () => {
  it("uploads each completed full checkpoint (receipt bound to the S3 destination) and publishes partial artifacts", async () => {
    const root = await tempRoot();
    const { manager } = await openManager(
      root,
      {
        save_async: false,
        save_every: 1,
        validation: { save_checkpoint: true, checkpoint_components: ["model"] },
        upload: { enabled: true, bucket },
      },
      { project: "upload-a", credentials: credentials() },
    );
    const full = await manager.beginSave(1, manager.planSave(1, { cadence: true })!);
    for (const [name, target] of Object.entries(full.targets))
      if (["model", "optim", "trainer"].includes(name)) {
        await mkdir(dirname(target), { recursive: true });
        await writeFile(target, randomBytes(4096));
      }
    const fullOutcome = await manager.commitSave(full);
    expect(fullOutcome).toMatchObject({ status: "committed", report: { upload: { status: "uploaded" } } });
    const receipt = JSON.parse(await readFile(join(full.dir, ".uploaded"), "utf8"));
    expect(receipt.destination).toMatchObject({
      scheme: "s3",
      bucket,
      prefix: `upload-a/grp/run/${manager.runTs}/checkpoints/iter_000000001`,
    });
    const remote = await store(`s3://${bucket}/upload-a/grp/run/${manager.runTs}/checkpoints/iter_000000001`);
    expect(await readObject(remote, "model.pt")).toEqual(await readFile(full.targets.model!));

    const artifact = await manager.beginSave(2, manager.planSave(2, { validation: true })!);
    await writeFile(artifact.targets.model!, randomBytes(4096));
    const artOutcome = await manager.commitSave(artifact);
    expect(artOutcome).toMatchObject({
      status: "committed",
      report: { kind: "artifact", upload: { status: "uploaded" } },
    });
    const archived = await store(
      `s3://${bucket}/upload-a/grp/run/${manager.runTs}/checkpoint_artifacts/iter_000000002`,
    );
    expect(await archived.head(".posttrain-checkpoint-artifact.json")).toBeDefined();
    expect(await archived.head(".posttrain-archive.json")).toBeDefined();
  });
});
