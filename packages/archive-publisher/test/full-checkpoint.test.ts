import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { UPLOADED_MARKER, sha256Hex } from "@ckpt/manifest";
import { createMemoryStore } from "@ckpt/object-store";
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
