import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { UPLOADED_MARKER, sha256Hex } from "@ckpt/manifest";
import { createFileStore, createMemoryStore } from "@ckpt/object-store";
import { describe, expect, it } from "vitest";
import { uploadFullCheckpoint } from "../src/index.js";
import { payload, tempDir, writeTree } from "./helpers.js";

describe("uploadFullCheckpoint", () => {
  it("uploads every file, skips same-size objects on a retry and writes a destination-bound receipt", async () => {
    const dir = join(await tempDir(), "checkpoints", "iter_000000100");
    await writeTree(dir, {
      "model.pt": payload("m"),
      "optim/__0_0.distcp": payload("o"),
      "trainer.pt": payload("t", 100),
      ".uploaded.tmp": "interrupted receipt",
    });
    const store = createMemoryStore();
    const first = await uploadFullCheckpoint(dir, store, { hash: (p) => p === "trainer.pt" });
    expect(first.uploaded).toEqual(["model.pt", "optim/__0_0.distcp", "trainer.pt"]);
    expect(first.files).toEqual([
      { path: "model.pt", size: 4096 },
      { path: "optim/__0_0.distcp", size: 4096 },
      { path: "trainer.pt", size: 100, sha256: sha256Hex(payload("t", 100)) },
    ]);
    const read = await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName));
    expect(read.legacy === false && read.marker).toMatchObject({
      kind: "full_checkpoint",
      iteration: 100,
      destination: store.identity,
      files: first.files,
    });
    store.clearCalls();
    const second = await uploadFullCheckpoint(dir, store, { hash: (p) => p === "trainer.pt" });
    expect(second.uploaded).toEqual([]);
    expect(second.skipped).toEqual(["model.pt", "optim/__0_0.distcp", "trainer.pt"]);
    expect(store.calls.filter((c) => c.op === "put")).toEqual([]);
    expect(await store.head(UPLOADED_MARKER.fileName)).toBeUndefined();
    expect(await store.head(".uploaded.tmp")).toBeUndefined();
    expect((await readFile(join(dir, ".uploaded.tmp"), "utf8")).length).toBeGreaterThan(0);
  });

  it("decides from one listing (a HEAD only for a hashed file listed at its size) and uploads concurrently", async () => {
    const dir = join(await tempDir(), "checkpoints", "iter_000000200");
    const files: Record<string, Uint8Array> = {};
    for (let i = 0; i < 12; i++) files[`optim/__${i}_0.distcp`] = payload(`o${i}`, 100 + i);
    files["model.pt"] = payload("m");
    await writeTree(dir, files);
    const store = createMemoryStore({ faults: [{ type: "delay", op: "put", ms: 5 }] });
    // Someone else's object under the same key with another size is replaced; same size is kept.
    await store.put("optim/__0_0.distcp", payload("stale", 7));
    await store.put("optim/__1_0.distcp", payload("o1", 101));
    store.clearCalls();
    let inFlight = 0;
    let peak = 0;
    const counted = new Proxy(store, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (prop !== "put") return typeof value === "function" ? value.bind(target) : value;
        return async (...args: Parameters<typeof store.put>) => {
          peak = Math.max(peak, ++inFlight);
          try {
            return await target.put(...args);
          } finally {
            inFlight--;
          }
        };
      },
    });
    const report = await uploadFullCheckpoint(dir, counted, {
      hash: (p) => p === "model.pt",
      concurrency: 5,
    });
    expect(peak).toBe(5);
    expect(report.skipped).toEqual(["optim/__1_0.distcp"]);
    expect(report.uploaded).toHaveLength(12);
    expect(store.calls.filter((c) => c.op === "list")).toHaveLength(1);
    expect(store.calls.filter((c) => c.op === "head")).toEqual([]);
    const puts = store.calls.filter((c) => c.op === "put");
    expect(puts).toHaveLength(12);
    expect((await store.head("optim/__0_0.distcp"))?.size).toBe(100);
    // The second run: every file is listed at its size; only the hashed one is HEADed.
    store.clearCalls();
    const again = await uploadFullCheckpoint(dir, store, { hash: (p) => p === "model.pt" });
    expect(again.uploaded).toEqual([]);
    expect(store.calls.filter((c) => c.op === "head").map((c) => c.key)).toEqual(["model.pt"]);
  });

  it("reports an upload failure to the caller and writes no receipt", async () => {
    const dir = join(await tempDir(), "iter_000000002");
    await writeTree(dir, { "model.pt": payload("m") });
    const store = createMemoryStore({ faults: [{ type: "fail", op: "put" }] });
    await expect(uploadFullCheckpoint(dir, store)).rejects.toMatchObject({
      code: "FULL_UPLOAD_FAILED",
      kind: "failed",
    });
    await expect(readFile(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("refuses a directory that is not an iteration", async () => {
    await expect(uploadFullCheckpoint(await tempDir(), createMemoryStore())).rejects.toMatchObject({
      code: "FULL_UPLOAD_NOT_ITER_DIR",
      kind: "input",
    });
  });
});

/** Bytes this process has read through read(2) so far (page-cache hits included): Linux's rchar. */
async function bytesReadByThisProcess(): Promise<number> {
  return Number(/^rchar: (\d+)$/m.exec(await readFile("/proc/self/io", "utf8"))![1]);
}

describe("uploadFullCheckpoint on recorded digests", () => {
  const SHARD = 4 << 20;
  async function recordedCheckpoint() {
    const dir = join(await tempDir(), "checkpoints", "iter_000000300");
    const files = {
      "model/__0_0.distcp": payload("rank 0", SHARD),
      "model/__1_0.distcp": payload("rank 1", SHARD),
      "trainer.pt": payload("t", 100),
    };
    await writeTree(dir, files);
    const recorded = new Map(
      Object.entries(files).map(([path, bytes]) => [
        path,
        { size: bytes.byteLength, sha256: sha256Hex(bytes) },
      ]),
    );
    return { dir, recorded };
  }

  it("reads each payload byte once and writes the recorded digests into the receipt", async () => {
    const { dir, recorded } = await recordedCheckpoint();
    const store = createFileStore({ root: join(await tempDir(), "archive") });
    const before = await bytesReadByThisProcess();
    // Every file is eligible for hashing; the recorded ones are not hashed before their upload.
    const report = await uploadFullCheckpoint(dir, store, { recorded, hash: () => true });
    const read = (await bytesReadByThisProcess()) - before;
    const payloadBytes = 2 * SHARD + 100;
    // Once to upload, not once more to hash first; the slack is the store's sidecars.
    expect(read).toBeGreaterThanOrEqual(payloadBytes);
    expect(read).toBeLessThan(payloadBytes + SHARD / 4);
    expect(report.files).toEqual([...recorded].map(([path, r]) => ({ path, ...r })));
    expect((await store.head("model/__1_0.distcp"))?.sha256).toBe(recorded.get("model/__1_0.distcp")!.sha256);
  });

  it("refuses a payload changed after commit before the receipt, on upload and on a same-size skip", async () => {
    const { dir, recorded } = await recordedCheckpoint();
    const shard = join(dir, "model", "__1_0.distcp");
    const original = await readFile(shard);
    const changed = Buffer.from(original);
    changed[SHARD / 2]! ^= 1;
    await writeFile(shard, changed);
    const store = createMemoryStore();
    await expect(uploadFullCheckpoint(dir, store, { recorded })).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
      subject: shard,
      message: expect.stringContaining("model/__1_0.distcp"),
    });
    expect(await store.head("model/__1_0.distcp")).toBeUndefined();
    await expect(stat(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
    // The archive already holds the recorded bytes: the skip still checks the local file.
    await store.put("model/__1_0.distcp", original, { sha256: recorded.get("model/__1_0.distcp")!.sha256 });
    await expect(uploadFullCheckpoint(dir, store, { recorded })).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
    });
    await expect(stat(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
    await writeFile(shard, original);
    expect(await uploadFullCheckpoint(dir, store, { recorded })).toMatchObject({
      skipped: expect.arrayContaining(["model/__1_0.distcp"]),
    });
  });
});
