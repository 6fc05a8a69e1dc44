import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { readUploadedMarker, sha256Hex, UPLOADED_MARKER_FILE } from "@ckpt/manifest";
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
    const read = await readUploadedMarker(join(dir, UPLOADED_MARKER_FILE));
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
    expect(await store.head(UPLOADED_MARKER_FILE)).toBeUndefined();
    expect(await store.head(".uploaded.tmp")).toBeUndefined();
    expect((await readFile(join(dir, ".uploaded.tmp"), "utf8")).length).toBeGreaterThan(0);
  });

  it("reports an upload failure to the caller and writes no receipt", async () => {
    const dir = join(await tempDir(), "iter_000000002");
    await writeTree(dir, { "model.pt": payload("m") });
    const store = createMemoryStore({ faults: [{ type: "fail", op: "put" }] });
    await expect(uploadFullCheckpoint(dir, store)).rejects.toMatchObject({
      code: "FULL_UPLOAD_FAILED",
      kind: "failed",
    });
    await expect(readFile(join(dir, UPLOADED_MARKER_FILE))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("refuses a directory that is not an iteration", async () => {
    await expect(uploadFullCheckpoint(await tempDir(), createMemoryStore())).rejects.toMatchObject({
      code: "FULL_UPLOAD_NOT_ITER_DIR",
      kind: "input",
    });
  });
});
