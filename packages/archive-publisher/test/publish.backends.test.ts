import { readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  MERGE_COMPLETE,
  UPLOADED_MARKER,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  sha256Hex,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { expect, it } from "vitest";
import { commitArtifact, publishArtifact } from "../src/index.js";
import { describeEachBackend, payload, tempDir, writeMergedArtifact, writeTree } from "./helpers.js";

async function remoteBytes(store: ObjectStore, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await store.get(key)) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

async function modelArtifact(
  seed = "model",
  extra: Record<string, string | Uint8Array> = {},
): Promise<string> {
  const dir = join(await tempDir(), "run", "checkpoint_artifacts", "iter_000000300");
  await writeTree(dir, { "model.pt": payload(seed), ...extra });
  await commitArtifact(dir, { format: "consolidated", components: ["model"] });
  return dir;
}

const SHARD = 4 << 20;

/** A committed trainer-style DCP artifact: two ranks' model shards, .metadata, one optim shard, trainer.pt. */
async function dcpArtifact(): Promise<string> {
  const dir = join(await tempDir(), "run", "checkpoint_artifacts", "iter_000000400");
  await writeTree(dir, {
    "model/.metadata": payload("metadata", 100),
    "model/__0_0.distcp": payload("rank 0", SHARD),
    "model/__1_0.distcp": payload("rank 1", SHARD),
    "optim/__0_0.distcp": payload("optim", SHARD),
    "trainer.pt": payload("trainer", 100),
  });
  await commitArtifact(dir, { format: "dcp", components: ["model", "optimizer", "training_state"] });
  return dir;
}

/** Bytes this process has read through read(2) so far (page-cache hits included): Linux's rchar. */
async function bytesReadByThisProcess(): Promise<number> {
  const io = await readFile("/proc/self/io", "utf8");
  return Number(/^rchar: (\d+)$/m.exec(io)![1]);
}

let labels = 0;
const label = () => `iter_${String(++labels).padStart(9, "0")}`;

describeEachBackend("publishArtifact", (backend) => {
  it("publishes declaration, payloads and manifest, then writes the receipt; a stale optim.pt stays out", async () => {
    const dir = await modelArtifact("model", { "optim.pt": payload("stale optimizer") });
    const store = await backend().open(label());
    const report = await publishArtifact(dir, store);
    expect(report.status).toBe("published");
    expect(report.inventory.map((f) => f.path)).toEqual([ARTIFACT_MANIFEST.fileName, "model.pt"]);
    expect(report.uploaded).toEqual(["model.pt"]);
    expect(report.destination).toEqual(store.identity);
    expect(await store.head("optim.pt")).toBeUndefined();
    const declaration = ARCHIVE_DECLARATION.parse(await remoteBytes(store, ARCHIVE_DECLARATION.fileName));
    const manifestBytes = await readFile(join(dir, ARTIFACT_MANIFEST.fileName));
    expect(declaration.manifest_sha256).toBe(sha256Hex(manifestBytes));
    expect(declaration.files).toEqual(report.inventory);
    expect(Buffer.compare(await remoteBytes(store, ARTIFACT_MANIFEST.fileName), manifestBytes)).toBe(0);
    expect((await store.head("model.pt"))?.sha256).toBe(sha256Hex(payload("model")));
    const receipt = await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName));
    expect(receipt.legacy).toBe(false);
    if (!receipt.legacy) {
      expect(receipt.marker.kind).toBe("artifact");
      expect(receipt.marker.destination).toEqual(store.identity);
      expect(receipt.marker.files).toEqual(report.inventory);
    }
  });

  it("skips when the receipt matches and adopts a committed identical archive without one", async () => {
    const dir = await modelArtifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store);
    const skipped = await publishArtifact(dir, store);
    expect(skipped).toMatchObject({ status: "skipped", uploaded: [] });
    await rm(join(dir, UPLOADED_MARKER.fileName));
    const adopted = await publishArtifact(dir, store);
    expect(adopted).toMatchObject({ status: "adopted", uploaded: [] });
    expect((await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName))).legacy).toBe(false);
  });

  it("refuses different contents for a committed destination and leaves it intact", async () => {
    const store = await backend().open(label());
    await publishArtifact(await modelArtifact("first"), store);
    const other = await modelArtifact("second");
    await expect(publishArtifact(other, store)).rejects.toMatchObject({
      code: "PUBLISH_REMOTE_CONFLICT",
      kind: "refused",
    });
    expect((await store.head("model.pt"))?.sha256).toBe(sha256Hex(payload("first")));
    await expect(stat(join(other, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("adds missing digests to the local manifest and declares the bytes it uploads", async () => {
    const dir = join(await tempDir(), "iter_000000007");
    const model = payload("undigested");
    await writeTree(dir, {
      "model.pt": model,
      [ARTIFACT_MANIFEST.fileName]: ARTIFACT_MANIFEST.serialize({
        schema: "posttrain.checkpoint-artifact.v1",
        iteration: 7,
        format: "consolidated",
        logical_components: ["model"],
        physical_components: [{ name: "model", kind: "file", path: "model.pt", size: model.byteLength }],
      }),
    });
    const store = await backend().open(label());
    const report = await publishArtifact(dir, store);
    expect(report.manifest_rewritten).toBe(true);
    const local = await readFile(join(dir, ARTIFACT_MANIFEST.fileName));
    const component = ARTIFACT_MANIFEST.parse(local).physical_components[0]!;
    expect(component.kind === "file" && component.sha256).toBe(sha256Hex(model));
    expect(Buffer.compare(await remoteBytes(store, ARTIFACT_MANIFEST.fileName), local)).toBe(0);
    const declaration = ARCHIVE_DECLARATION.parse(await remoteBytes(store, ARCHIVE_DECLARATION.fileName));
    expect(declaration.manifest_sha256).toBe(sha256Hex(local));
  });

  it("converts a legacy merge manifest and archives its original bytes beside it", async () => {
    const dir = join(await tempDir(), "iter_000000300");
    const model = payload("merged");
    const legacy = `${JSON.stringify({ tool: "merge_model_pt", version: 1, iteration: 300, files: { "model.pt": { size: model.byteLength, sha256: sha256Hex(model) } } })}\n`;
    await writeTree(dir, { "model.pt": model, [ARTIFACT_MANIFEST.fileName]: legacy });
    const store = await backend().open(label());
    const report = await publishArtifact(dir, store);
    expect(report.inventory.map((f) => f.path)).toEqual([
      ARTIFACT_MANIFEST.fileName,
      LEGACY_ARTIFACT_MANIFEST_FILE,
      "model.pt",
    ]);
    expect(await readFile(join(dir, LEGACY_ARTIFACT_MANIFEST_FILE), "utf8")).toBe(legacy);
    expect((await remoteBytes(store, LEGACY_ARTIFACT_MANIFEST_FILE)).toString("utf8")).toBe(legacy);
    const converted = ARTIFACT_MANIFEST.parse(await readFile(join(dir, ARTIFACT_MANIFEST.fileName)));
    expect(converted).toMatchObject({ iteration: 300, format: "consolidated", producer: "merge_model_pt/1" });
    // A second run finds the converted manifest and the preserved original: nothing to do.
    expect((await publishArtifact(dir, store)).status).toBe("skipped");
  });

  it("archives the merge completion and the diagnostic it records inside the artifact", async () => {
    const dir = join(await tempDir(), "iter_000000300");
    await writeMergedArtifact(dir, { "notes.txt": "not archived" });
    const store = await backend().open(label());
    const report = await publishArtifact(dir, store);
    expect(report.inventory.map((f) => f.path)).toEqual([
      MERGE_COMPLETE.fileName,
      ARTIFACT_MANIFEST.fileName,
      "merge-diagnostics.json",
      "model.pt",
    ]);
    expect(await store.head("notes.txt")).toBeUndefined();
  });

  it("releases exactly the payloads with deleteLocal and keeps manifest and receipt", async () => {
    const dir = join(await tempDir(), "iter_000000100");
    await writeTree(dir, {
      "model/.metadata": "meta",
      "model/__0_0.distcp": payload("s0"),
      "trainer.pt": payload("trainer", 100),
      "unrelated.log": "kept",
    });
    await commitArtifact(dir, { format: "dcp", components: ["model", "training_state"] });
    const store = await backend().open(label());
    const report = await publishArtifact(dir, store, { deleteLocal: true });
    expect(report.removed).toEqual(["model/.metadata", "model/__0_0.distcp", "trainer.pt"]);
    expect(report.freed_bytes).toBe(4 + 4096 + 100);
    expect((await readdir(dir)).sort()).toEqual([
      ARTIFACT_MANIFEST.fileName,
      UPLOADED_MARKER.fileName,
      "unrelated.log",
    ]);
    expect((await store.head("model/__0_0.distcp"))?.size).toBe(4096);
  });

  it("refuses a payload whose size contradicts its manifest before touching the store", async () => {
    const dir = await modelArtifact();
    await writeFile(join(dir, "model.pt"), payload("tampered", 4095));
    const store = await backend().open(label());
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      message: expect.stringContaining("is 4095 bytes but recorded as 4096"),
    });
    expect(await store.head(ARCHIVE_DECLARATION.fileName)).toBeUndefined();
  });

  it("refuses bytes that contradict the recorded digest as it uploads them: nothing of them stored, nothing committed", async () => {
    const dir = await modelArtifact();
    const original = await readFile(join(dir, "model.pt"));
    // Same size, other bytes: only reading them finds it, and publish reads them once, to upload.
    await writeFile(join(dir, "model.pt"), payload("tampered"));
    const store = await backend().open(label());
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      kind: "refused",
      subject: join(dir, "model.pt"),
      message: expect.stringContaining("does not hold the bytes its manifest records"),
    });
    expect(await store.head("model.pt")).toBeUndefined();
    expect(await store.head(ARTIFACT_MANIFEST.fileName)).toBeUndefined();
    await expect(stat(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
    // The declaration binds the recorded inventory: with the payload restored, the publish resumes.
    expect(await store.head(ARCHIVE_DECLARATION.fileName)).toBeDefined();
    await writeFile(join(dir, "model.pt"), original);
    expect(await publishArtifact(dir, store)).toMatchObject({ status: "published", uploaded: ["model.pt"] });
  });

  it("publishes DCP shards on their recorded digests, reading each payload byte once", async () => {
    const dir = await dcpArtifact();
    const payloadBytes = 3 * SHARD + 200;
    const store = await backend().open(label());
    const before = await bytesReadByThisProcess();
    const report = await publishArtifact(dir, store);
    const read = (await bytesReadByThisProcess()) - before;
    expect(report.status).toBe("published");
    expect((await store.head("model/__1_0.distcp"))?.sha256).toBe(sha256Hex(payload("rank 1", SHARD)));
    // Once to upload, not once more to hash first; the slack is the manifest and bookkeeping files.
    expect(read).toBeGreaterThanOrEqual(payloadBytes);
    expect(read).toBeLessThan(payloadBytes + SHARD / 4);
  });

  it("refuses a DCP shard changed by one byte after commit: nothing of it stored, nothing committed", async () => {
    const dir = await dcpArtifact();
    const shard = join(dir, "model", "__1_0.distcp");
    const bytes = await readFile(shard);
    bytes[SHARD / 2]! ^= 1;
    await writeFile(shard, bytes);
    const store = await backend().open(label());
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      subject: shard,
      message: expect.stringContaining("model/__1_0.distcp"),
    });
    expect(await store.head("model/__1_0.distcp")).toBeUndefined();
    expect(await store.head(ARTIFACT_MANIFEST.fileName)).toBeUndefined();
    await expect(stat(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("hashes the recorded payloads before adopting a committed archive, and refuses bytes that changed", async () => {
    const dir = await modelArtifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store);
    await rm(join(dir, UPLOADED_MARKER.fileName));
    await writeFile(join(dir, "model.pt"), payload("tampered"));
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      subject: join(dir, "model.pt"),
    });
    await expect(stat(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
