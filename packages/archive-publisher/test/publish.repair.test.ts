import { readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { UPLOADED_MARKER, sha256Hex } from "@ckpt/manifest";
import { createMemoryStore, type ObjectStore } from "@ckpt/object-store";
import { expect, it } from "vitest";
import { commitArtifact, publishArtifact } from "../src/index.js";
import { describeEachBackend, payload, tempDir, writeTree } from "./helpers.js";

async function remoteBytes(store: ObjectStore, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await store.get(key)) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

/** A committed artifact: model.pt and trainer.pt made from `seed`. */
async function artifact(seed = "model"): Promise<string> {
  const dir = join(await tempDir(), "run", "checkpoint_artifacts", "iter_000000300");
  await writeTree(dir, {
    "model.pt": payload(seed, 64 << 10),
    "trainer.pt": payload(`${seed}-trainer`, 512),
  });
  await commitArtifact(dir, { format: "consolidated", components: ["model", "training_state"] });
  return dir;
}

/** Same size, other bytes, stored with their own (honest) digest: what bit rot or a bad copy leaves. */
async function damage(store: ObjectStore, key: string, size: number): Promise<void> {
  const bytes = payload("rot", size);
  await store.put(key, bytes, { sha256: sha256Hex(bytes) });
}

let labels = 0;
const label = () => `repair-${++labels}`;

describeEachBackend("publishArtifact with repair", (backend) => {
  it("re-uploads only the missing and damaged objects of a committed archive, verifies it and writes the receipt", async () => {
    const dir = await artifact();
    const store = await backend().open(label());
    await publishArtifact(dir, store);
    await rm(join(dir, UPLOADED_MARKER.fileName));
    await store.delete("model.pt");
    await damage(store, "trainer.pt", 512);
    // A plain publish cannot repair it: it adopts, verifies, and refuses.
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_REMOTE_VERIFY_FAILED",
      message: expect.stringContaining("ckpt artifact publish --repair"),
    });

    const dry = await publishArtifact(dir, store, { repair: true, dryRun: true });
    expect(dry.repaired).toEqual([
      {
        path: "model.pt",
        size: 64 << 10,
        status: "missing",
        detail: "model.pt: missing from the destination",
      },
      {
        path: "trainer.pt",
        size: 512,
        status: "digest_mismatch",
        detail: expect.stringMatching(
          /^trainer\.pt: the object's sha256 is [0-9a-f]{64}; [0-9a-f]{64} was recorded$/,
        ),
      },
    ]);
    expect(dry.dry_run?.would_upload).toEqual(["model.pt", "trainer.pt"]);
    expect(await store.head("model.pt")).toBeUndefined();
    await expect(stat(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });

    const report = await publishArtifact(dir, store, { repair: true });
    expect(report).toMatchObject({ status: "repaired", uploaded: ["model.pt", "trainer.pt"] });
    expect(await remoteBytes(store, "model.pt")).toEqual(await readFile(join(dir, "model.pt")));
    expect(await remoteBytes(store, "trainer.pt")).toEqual(await readFile(join(dir, "trainer.pt")));
    expect((await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName))).legacy).toBe(false);
    // Sound again: a plain publish skips it, and another repair finds nothing to do.
    expect((await publishArtifact(dir, store)).status).toBe("skipped");
    expect(await publishArtifact(dir, store, { repair: true })).toMatchObject({ repaired: [], uploaded: [] });
  });

  it("refuses an archive that declares other bytes than the local artifact, naming the first file, and writes nothing", async () => {
    const store = await backend().open(label());
    await publishArtifact(await artifact("first"), store);
    await store.delete("trainer.pt");
    const other = await artifact("second");
    await expect(publishArtifact(other, store, { repair: true })).rejects.toMatchObject({
      code: "PUBLISH_REPAIR_MISMATCH",
      subject: "model.pt",
      message: expect.stringMatching(
        /: model\.pt is 65536 bytes with sha256 [0-9a-f]{64} locally, but the archive declares 65536 bytes with sha256 /,
      ),
    });
    expect(await store.head("trainer.pt")).toBeUndefined();
    await expect(stat(join(other, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("refuses a destination that is not committed: publishing resumes it", async () => {
    const store = await backend().open(label());
    await expect(publishArtifact(await artifact(), store, { repair: true })).rejects.toMatchObject({
      code: "PUBLISH_REPAIR_NOT_COMMITTED",
    });
  });
});

it("judges an object by its bytes, not by what its metadata claims", async () => {
  const dir = await artifact();
  const memory = createMemoryStore();
  await publishArtifact(dir, memory);
  const declared = sha256Hex(await readFile(join(dir, "model.pt")));
  await damage(memory, "model.pt", 64 << 10);
  memory.inject({ type: "lieOnHead", key: "model.pt", sha256: declared });
  // HEAD vouches for it...
  expect((await publishArtifact(dir, memory)).status).toBe("skipped");
  memory.clearFaults();
  memory.inject({ type: "lieOnHead", key: "model.pt", sha256: declared, times: 1 });
  // ...the repair reads it, and replaces it.
  const report = await publishArtifact(dir, memory, { repair: true });
  expect(report.repaired).toMatchObject([{ path: "model.pt", status: "digest_mismatch" }]);
  expect(await remoteBytes(memory, "model.pt")).toEqual(await readFile(join(dir, "model.pt")));
});
