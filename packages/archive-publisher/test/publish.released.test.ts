import { readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ARCHIVE_DECLARATION, ARTIFACT_MANIFEST, UPLOADED_MARKER } from "@ckpt/manifest";
import { createMemoryStore } from "@ckpt/object-store";
import { describe, expect, it } from "vitest";
import { commitArtifact, type PublishEvent, publishArtifact } from "../src/index.js";
import { describeEachBackend, payload, tempDir, writeMergedArtifact, writeTree } from "./helpers.js";

/** A DCP artifact: two shards and a training state, so a release can be partial. */
async function dcpArtifact(seed = "dcp"): Promise<string> {
  const dir = join(await tempDir(), "run", "checkpoint_artifacts", "iter_000000500");
  await writeTree(dir, {
    "model/.metadata": `meta ${seed}`,
    "model/__0_0.distcp": payload(`${seed}-s0`),
    "model/__1_0.distcp": payload(`${seed}-s1`),
    "trainer.pt": payload(`${seed}-trainer`, 100),
  });
  await commitArtifact(dir, { format: "dcp", components: ["model", "training_state"] });
  return dir;
}

const PAYLOADS = ["model/.metadata", "model/__0_0.distcp", "model/__1_0.distcp", "trainer.pt"];

/** Publishes and collects the paths every hash event named. */
async function publishHashing(
  dir: string,
  store: Parameters<typeof publishArtifact>[1],
  options: Parameters<typeof publishArtifact>[2] = {},
): Promise<{ report: Awaited<ReturnType<typeof publishArtifact>>; hashed: Set<string> }> {
  const hashed = new Set<string>();
  const report = await publishArtifact(dir, store, options, (event: PublishEvent) => {
    if (event.type === "hash") hashed.add(event.path);
  });
  return { report, hashed };
}

let labels = 0;
const label = () => `iter_${String(++labels).padStart(9, "0")}`;

describeEachBackend("publish of a released artifact", (backend) => {
  it("skips a fully released artifact after verifying the remote, hashing nothing", async () => {
    const dir = await dcpArtifact();
    const store = await backend().open(label());
    const first = await publishArtifact(dir, store, { deleteLocal: true });
    expect(first.removed).toEqual(PAYLOADS);
    const { report, hashed } = await publishHashing(dir, store);
    expect(report).toMatchObject({
      status: "skipped",
      uploaded: [],
      removed: [],
      released_earlier: PAYLOADS,
    });
    expect(report.inventory).toEqual(first.inventory);
    expect(hashed.size).toBe(0);
    // Releasing again has nothing left to release.
    const again = await publishArtifact(dir, store, { deleteLocal: true });
    expect(again).toMatchObject({ status: "skipped", removed: [], freed_bytes: 0 });
    expect((await readdir(dir)).sort()).toEqual([ARTIFACT_MANIFEST.fileName, UPLOADED_MARKER.fileName]);
  });

  it("hashes the payloads still present of a partial release and releases them on request", async () => {
    const dir = await dcpArtifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store);
    // An interrupted release: one shard and the training state are gone.
    await rm(join(dir, "model/__1_0.distcp"));
    await rm(join(dir, "trainer.pt"));
    const { report, hashed } = await publishHashing(dir, store);
    expect(report).toMatchObject({
      status: "skipped",
      released_earlier: ["model/__1_0.distcp", "trainer.pt"],
    });
    expect([...hashed].some((p) => p.endsWith("__1_0.distcp") || p.endsWith("trainer.pt"))).toBe(false);
    expect(hashed.has(join(dir, "model/__0_0.distcp"))).toBe(true);
    const released = await publishArtifact(dir, store, { deleteLocal: true });
    expect(released.removed).toEqual(["model/.metadata", "model/__0_0.distcp"]);
    expect(released.freed_bytes).toBe("meta dcp".length + 4096);
    expect((await readdir(dir)).sort()).toEqual([ARTIFACT_MANIFEST.fileName, UPLOADED_MARKER.fileName]);
  });

  it("refuses a partial release whose present payload changed, before any write", async () => {
    const dir = await dcpArtifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store);
    await rm(join(dir, "trainer.pt"));
    await writeFile(join(dir, "model/__0_0.distcp"), payload("tampered"));
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      subject: join(dir, "model/__0_0.distcp"),
    });
  });

  it("fails with PUBLISH_RELEASED_REMOTE_INVALID naming the objects when the remote copy no longer verifies", async () => {
    const dir = await dcpArtifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store, { deleteLocal: true });
    await store.delete("model/__1_0.distcp");
    const error = await publishArtifact(dir, store).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({
      code: "PUBLISH_RELEASED_REMOTE_INVALID",
      kind: "failed",
      subject: "model/__1_0.distcp",
    });
    const message = (error as Error).message;
    expect(message).toContain("model/__1_0.distcp: missing from the destination");
    expect(message).toContain("cannot be re-published from a released copy");
    expect((await readdir(dir)).sort()).toEqual([ARTIFACT_MANIFEST.fileName, UPLOADED_MARKER.fileName]);
  });

  it("fails the same way when the remote manifest is gone, and uploads nothing", async () => {
    const dir = await dcpArtifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store, { deleteLocal: true });
    await store.delete(ARTIFACT_MANIFEST.fileName);
    await store.delete("trainer.pt");
    const error = await publishArtifact(dir, store).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({
      code: "PUBLISH_RELEASED_REMOTE_INVALID",
      subject: ARTIFACT_MANIFEST.fileName,
    });
    const message = (error as Error).message;
    expect(message).toContain(`holds no ${ARTIFACT_MANIFEST.fileName}`);
    expect(message).toContain("trainer.pt: missing from the destination");
    expect(message).toContain("cannot be re-published from a released copy");
    expect(await store.head(ARTIFACT_MANIFEST.fileName)).toBeUndefined();
    expect(await store.head("trainer.pt")).toBeUndefined();
  });

  it("refuses released payloads without this destination's receipt, leaving another destination empty", async () => {
    const dir = await dcpArtifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store, { deleteLocal: true });
    const other = await backend().open(label());
    await expect(publishArtifact(dir, other)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      kind: "refused",
      message: expect.stringContaining("receipt binds another destination"),
    });
    expect(await other.head(ARCHIVE_DECLARATION.fileName)).toBeUndefined();
    await rm(join(dir, UPLOADED_MARKER.fileName));
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      subject: join(dir, "model/.metadata"),
      message: expect.stringContaining("no readable .uploaded receipt"),
    });
  });
});

describe("publish of a released artifact (memory call log)", () => {
  it("HEADs every receipt entry when skipping, and writes nothing", async () => {
    const dir = await dcpArtifact();
    const store = createMemoryStore();
    const first = await publishArtifact(dir, store, { deleteLocal: true });
    store.clearCalls();
    await publishArtifact(dir, store);
    expect(store.calls.filter((c) => c.op !== "head" && c.op !== "get")).toEqual([]);
    const headed = new Set(store.calls.filter((c) => c.op === "head").map((c) => c.key));
    expect([...headed].sort()).toEqual(first.inventory.map((f) => f.path).sort());
  });

  it("fails when a remote object's digest changed behind the receipt", async () => {
    const dir = await dcpArtifact();
    const store = createMemoryStore();
    await publishArtifact(dir, store, { deleteLocal: true });
    store.inject({ type: "lieOnHead", key: "trainer.pt", sha256: "0".repeat(64) });
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_RELEASED_REMOTE_INVALID",
      message: expect.stringContaining(`trainer.pt: the object's sha256 is ${"0".repeat(64)}`),
    });
  });

  it("refuses an absent payload whose manifest records no digest: no archive of it can be proven", async () => {
    const dir = join(await tempDir(), "iter_000000007");
    await writeTree(dir, {
      [ARTIFACT_MANIFEST.fileName]: ARTIFACT_MANIFEST.serialize({
        schema: "posttrain.checkpoint-artifact.v1",
        iteration: 7,
        format: "consolidated",
        logical_components: ["model"],
        physical_components: [{ name: "model", kind: "file", path: "model.pt", size: 10 }],
      }),
    });
    const store = createMemoryStore();
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      message: expect.stringContaining("model.pt is missing and its manifest records no digest"),
    });
    expect(store.calls).toEqual([]);
  });

  it("still refuses a missing record (not a payload) even under a matching receipt", async () => {
    const dir = join(await tempDir(), "iter_000000300");
    await writeMergedArtifact(dir);
    const store = createMemoryStore();
    await publishArtifact(dir, store, { deleteLocal: true });
    await rm(join(dir, "merge-diagnostics.json"));
    store.clearCalls();
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      subject: join(dir, "merge-diagnostics.json"),
      message: expect.stringContaining("merge-diagnostics.json is missing"),
    });
    expect(store.calls).toEqual([]);
  });
});
