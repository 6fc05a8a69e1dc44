import { rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ARCHIVE_DECLARATION, ARTIFACT_MANIFEST, UPLOADED_MARKER, sha256Hex } from "@ckpt/manifest";
import { createFileStore, createMemoryStore, type ObjectStore } from "@ckpt/object-store";
import { describe, expect, it } from "vitest";
import { commitArtifact, publishArtifact, publishArtifactIter } from "../src/index.js";
import { payload, tempDir, writeTree } from "./helpers.js";

async function artifact(seed = "model"): Promise<string> {
  const dir = join(await tempDir(), "iter_000000300");
  await writeTree(dir, { "model.pt": payload(seed), "trainer.pt": payload(`${seed}-trainer`, 64) });
  await commitArtifact(dir, { format: "consolidated", components: ["model", "training_state"] });
  return dir;
}

const noReceipt = async (dir: string) =>
  expect(stat(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });

describe("publish under store faults (memory store)", () => {
  it("fails closed when the store ignores conditional creates, before any payload", async () => {
    const dir = await artifact();
    const store = createMemoryStore({ faults: [{ type: "ignoreConditional" }] });
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_CONDITIONAL_UNENFORCED",
      kind: "refused",
    });
    expect(store.calls.filter((c) => c.op === "put")).toEqual([]);
    expect(await store.head(ARCHIVE_DECLARATION.fileName)).toBeUndefined();
    await noReceipt(dir);
  });

  it("a probe create whose answer was lost (the retry finds its own bytes) is not taken for an unenforced store", async () => {
    const dir = await artifact();
    const memory = createMemoryStore();
    let lost = 0;
    // The first create of each probe succeeds, but its answer is lost: the retry sees "exists".
    const store = new Proxy(memory, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (prop !== "createIfAbsent") return typeof value === "function" ? value.bind(target) : value;
        return async (...args: Parameters<ObjectStore["createIfAbsent"]>) => {
          const result = await target.createIfAbsent(...args);
          if (!args[0].startsWith(".posttrain-archive.probe-") || result.status !== "created" || lost > 0)
            return result;
          lost++;
          return target.createIfAbsent(...args);
        };
      },
    });
    expect((await publishArtifact(dir, store)).status).toBe("published");
    expect(lost).toBe(1);
    // A store that overwrites is still refused.
    const overwriting = createMemoryStore({ faults: [{ type: "ignoreConditional" }] });
    await expect(publishArtifact(await artifact(), overwriting)).rejects.toMatchObject({
      code: "PUBLISH_CONDITIONAL_UNENFORCED",
    });
  });

  it("refuses when HEAD reports another digest after the upload, and writes no receipt", async () => {
    const dir = await artifact();
    const store = createMemoryStore({
      faults: [{ type: "lieOnHead", key: "model.pt", sha256: "0".repeat(64) }],
    });
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({ code: "PUBLISH_UPLOAD_VERIFY_FAILED" });
    expect(await store.head(ARTIFACT_MANIFEST.fileName)).toBeUndefined();
    await noReceipt(dir);
  });

  it("fails the inventory check after the commit when an object vanished meanwhile, and writes no receipt", async () => {
    const dir = await artifact();
    const memory = createMemoryStore();
    // Someone deletes model.pt between its verification and the listing after the commit.
    const store = new Proxy(memory, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (prop !== "createIfAbsent") return typeof value === "function" ? value.bind(target) : value;
        return async (...args: Parameters<ObjectStore["createIfAbsent"]>) => {
          const result = await target.createIfAbsent(...args);
          if (args[0] === ARTIFACT_MANIFEST.fileName) await target.delete("model.pt");
          return result;
        };
      },
    });
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_REMOTE_VERIFY_FAILED",
      subject: "model.pt",
      message: expect.stringContaining("model.pt: missing from the destination"),
    });
    await noReceipt(dir);
  });

  it("verifies a published archive by one HEAD per payload, and by a listing after the commit", async () => {
    const dir = await artifact();
    const store = createMemoryStore();
    await publishArtifact(dir, store);
    const heads = store.calls.filter((c) => c.op === "head").map((c) => c.key);
    expect(heads.sort()).toEqual(["model.pt", "trainer.pt"]);
    expect(store.calls.filter((c) => c.op === "list")).toHaveLength(2);
  });

  it("verifies an adopted archive by HEAD: metadata that lies fails it, and no receipt is written", async () => {
    const dir = await artifact();
    const store = createMemoryStore();
    await publishArtifact(dir, store);
    await rm(join(dir, UPLOADED_MARKER.fileName));
    store.inject({ type: "lieOnHead", key: "model.pt", sha256: "0".repeat(64) });
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_REMOTE_VERIFY_FAILED",
      subject: "model.pt",
    });
    await noReceipt(dir);
  });

  it("resumes after a failure following the declaration without re-uploading verified payloads", async () => {
    const dir = await artifact();
    const store = createMemoryStore({ faults: [{ type: "fail", op: "put", key: "trainer.pt", nth: 1 }] });
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({ code: "PUBLISH_STORE_FAILED" });
    expect(await store.head(ARCHIVE_DECLARATION.fileName)).toBeDefined();
    expect(await store.head(ARTIFACT_MANIFEST.fileName)).toBeUndefined();
    await noReceipt(dir);
    store.clearCalls();
    const report = await publishArtifact(dir, store);
    expect(report.status).toBe("published");
    expect(report.uploaded).toEqual(["trainer.pt"]);
    expect(store.calls.filter((c) => c.op === "put").map((c) => c.key)).toEqual(["trainer.pt"]);
    expect(store.calls.some((c) => c.op === "createIfAbsent" && c.key === ARCHIVE_DECLARATION.fileName)).toBe(
      false,
    );
  });

  it("refuses different contents for a declared destination before writing any payload", async () => {
    const store = createMemoryStore({ faults: [{ type: "fail", op: "put", key: "trainer.pt" }] });
    await expect(publishArtifact(await artifact("first"), store)).rejects.toMatchObject({
      code: "PUBLISH_STORE_FAILED",
    });
    const firstModel = await store.head("model.pt");
    store.clearFaults();
    store.clearCalls();
    const other = await artifact("second");
    await expect(publishArtifact(other, store)).rejects.toMatchObject({
      code: "PUBLISH_DECLARATION_CONFLICT",
      kind: "refused",
      message: expect.stringContaining("another destination"),
    });
    expect(
      store.calls.filter((c) => c.op === "put" || c.op === "createIfAbsent" || c.op === "delete"),
    ).toEqual([]);
    expect((await store.head("model.pt"))?.sha256).toBe(firstModel?.sha256);
    await noReceipt(other);
  });

  it("still verifies the remote when skipping, and refuses when an object went missing", async () => {
    const dir = await artifact();
    const store = createMemoryStore();
    await publishArtifact(dir, store);
    await store.delete("trainer.pt");
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({ code: "PUBLISH_REMOTE_VERIFY_FAILED" });
  });

  it("refuses deleteLocal when a local payload changed after publishing, deleting nothing", async () => {
    const dir = await artifact();
    const store = createMemoryStore();
    await publishArtifact(dir, store);
    await rm(join(dir, UPLOADED_MARKER.fileName));
    // Same size, other bytes: publish refuses it as a contradiction of the manifest.
    await writeFile(join(dir, "trainer.pt"), payload("other-trainer", 64));
    await expect(publishArtifact(dir, store, { deleteLocal: true })).rejects.toMatchObject({
      code: "PUBLISH_PAYLOAD_MISMATCH",
    });
    expect((await stat(join(dir, "model.pt"))).size).toBe(4096);
  });

  it("refuses deleteLocal when the live remote copy fails verification", async () => {
    const dir = await artifact();
    const store = createMemoryStore();
    await publishArtifact(dir, store);
    store.inject({ type: "lieOnHead", key: "model.pt", nth: 2, sha256: sha256Hex("x") });
    await expect(publishArtifact(dir, store, { deleteLocal: true })).rejects.toMatchObject({
      code: "PUBLISH_DELETE_REFUSED",
    });
    expect((await stat(join(dir, "model.pt"))).size).toBe(4096);
  });

  it("emits typed progress events in publish order", async () => {
    const dir = await artifact();
    const types: string[] = [];
    const iter = publishArtifactIter(dir, createMemoryStore());
    for (;;) {
      const next = await iter.next();
      if (next.done) break;
      const type = next.value.type;
      if (type !== "hash" && type !== "upload" && types.at(-1) !== type) types.push(type);
    }
    expect(types).toEqual(["plan", "declaration", "uploaded", "committed", "verified", "receipt"]);
  });
});

describe("publish under abort", () => {
  it("an abort during an upload ends as PUBLISH_ABORTED caused by the store's abort, not as a store failure", async () => {
    const dir = join(await tempDir(), "iter_000000300");
    await writeTree(dir, { "model.pt": payload("big", 8 << 20), "trainer.pt": payload("trainer", 64) });
    await commitArtifact(dir, { format: "consolidated", components: ["model", "training_state"] });
    const store = createFileStore({ root: join(await tempDir(), "archive") });
    const controller = new AbortController();
    const error = await publishArtifact(
      dir,
      store,
      { signal: controller.signal, uploadConcurrency: 1 },
      (event) => {
        if (event.type === "upload") controller.abort(new Error("SIGINT received"));
      },
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "PUBLISH_ABORTED", cause: { code: "STORE_ABORTED" } });
    expect(await store.head(ARTIFACT_MANIFEST.fileName)).toBeUndefined();
    await noReceipt(dir);
  });
});
