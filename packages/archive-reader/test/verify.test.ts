import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createMemoryStore, type ObjectInfo } from "@ckpt/object-store";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { judgeRemoteObject, verifyReceipt, verifyRemoteFiles } from "../src/index.js";
import { describeEachBackend } from "./helpers/backends.js";
import { makeArtifact, putArchive, receiptFor, sha, text } from "./helpers/archive.js";

const D = "a".repeat(64);
const E = "e".repeat(64);
const info = (size: number, sha256?: string): ObjectInfo => ({
  key: "k",
  size,
  metadata: {},
  ...(sha256 === undefined ? {} : { sha256 }),
});

describe("judgeRemoteObject", () => {
  const cases: Array<[string, { size: number; sha256?: string }, ObjectInfo | undefined, string]> = [
    ["missing object", { size: 4, sha256: D }, undefined, "missing"],
    ["same size and digest", { size: 4, sha256: D }, info(4, D), "ok"],
    ["other size, same digest", { size: 4, sha256: D }, info(5, D), "size_mismatch"],
    ["other size, no digest expected", { size: 4 }, info(5), "size_mismatch"],
    ["other digest", { size: 4, sha256: D }, info(4, E), "digest_mismatch"],
    ["no digest metadata", { size: 4, sha256: D }, info(4), "digest_absent"],
    ["size-only entry, size matches", { size: 4 }, info(4, E), "ok"],
  ];
  it.each(cases)("%s", (_name, expected, head, status) => {
    const check = judgeRemoteObject({ path: "model.pt", ...expected }, head);
    expect(check.status).toBe(status);
    expect(check.path).toBe("model.pt");
    expect(check.actual === undefined).toBe(head === undefined);
  });
});

describe("verifyRemoteFiles", () => {
  it("HEADs only, in the order given, and names each object", async () => {
    const store = createMemoryStore();
    await store.put("b", text("bb"), { sha256: sha(text("bb")) });
    await store.put("a", text("a"), { sha256: sha(text("a")) });
    const result = await verifyRemoteFiles(
      store,
      [
        { path: "b", size: 2, sha256: sha(text("bb")) },
        { path: "a", size: 1, sha256: sha(text("a")) },
        { path: "c", size: 1 },
      ],
      { concurrency: 2 },
    );
    expect(result.ok).toBe(false);
    expect(result.objects.map((o) => [o.path, o.status])).toEqual([
      ["b", "ok"],
      ["a", "ok"],
      ["c", "missing"],
    ]);
    expect(new Set(store.calls.filter((c) => c.op !== "put").map((c) => c.op))).toEqual(new Set(["head"]));
  });

  it("is ok for an empty inventory and fails on lying metadata", async () => {
    const store = createMemoryStore({ faults: [{ type: "lieOnHead", key: "a", sha256: E }] });
    expect(await verifyRemoteFiles(store, [])).toEqual({ ok: true, objects: [] });
    await store.put("a", text("a"), { sha256: sha(text("a")) });
    const result = await verifyRemoteFiles(store, [{ path: "a", size: 1, sha256: sha(text("a")) }]);
    expect(result).toMatchObject({
      ok: false,
      objects: [{ path: "a", status: "digest_mismatch", actual: { sha256: E } }],
    });
  });

  it("throws store failures instead of reporting them as objects", async () => {
    const store = createMemoryStore({ faults: [{ type: "fail", op: "head" }] });
    await expect(verifyRemoteFiles(store, [{ path: "a", size: 1 }])).rejects.toMatchObject({
      code: "STORE_REQUEST_FAILED",
    });
  });

  it("stops when aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      verifyRemoteFiles(createMemoryStore(), [{ path: "a", size: 1 }], { signal: controller.signal }),
    ).rejects.toMatchObject({ code: "READER_ABORTED" });
  });
});

describe("verifyReceipt: input", () => {
  it("refuses a directory without a receipt, a legacy receipt, and a malformed one", async () => {
    const dir = await testdir();
    const store = createMemoryStore();
    await expect(verifyReceipt(dir, store)).rejects.toMatchObject({
      code: "READER_RECEIPT_MISSING",
      kind: "input",
    });
    await writeFile(join(dir, ".uploaded"), "s3://bucket/prefix uploaded\n");
    await expect(verifyReceipt(dir, store)).rejects.toMatchObject({
      code: "READER_LEGACY_RECEIPT",
      kind: "refused",
    });
    await writeFile(join(dir, ".uploaded"), '{"schema": "posttrain.archive-marker.v1"}');
    await expect(verifyReceipt(dir, store)).rejects.toMatchObject({
      code: "READER_RECEIPT_INVALID",
      kind: "input",
    });
    expect(store.calls).toEqual([]);
  });

  it("refuses a receipt bound elsewhere before any HEAD, naming both destinations", async () => {
    const dir = await testdir();
    const store = createMemoryStore({ prefix: "run/checkpoint_artifacts/iter_000000300" });
    const artifact = makeArtifact();
    await putArchive(store, artifact);
    store.clearCalls();
    const elsewhere = {
      scheme: "s3",
      endpoint: "s3.other.example.com",
      bucket: "bkt",
      prefix: "run/checkpoint_artifacts/iter_000000300",
    } as const;
    await writeFile(join(dir, ".uploaded"), receiptFor(artifact, elsewhere));
    const refusal = verifyReceipt(dir, store);
    await expect(refusal).rejects.toMatchObject({
      code: "READER_RECEIPT_DESTINATION_MISMATCH",
      kind: "refused",
    });
    const message = await refusal.catch((e: Error) => e.message);
    expect(message).toContain("s3://bkt/run/checkpoint_artifacts/iter_000000300 at s3.other.example.com");
    expect(message).toContain(store.uri);
    expect(store.calls).toEqual([]);
  });
});

describeEachBackend("verifyReceipt", (makeStore) => {
  async function published() {
    const dir = await testdir();
    const store = await makeStore("verify");
    const artifact = makeArtifact({ extras: new Map([[".merge-complete.json", text("{}\n")]]) });
    await putArchive(store, artifact);
    const iterDir = join(dir, "iter_000000300");
    await mkdir(iterDir);
    await writeFile(join(iterDir, ".uploaded"), receiptFor(artifact, store.identity));
    return { store, artifact, iterDir };
  }

  it("passes a sound archive, every recorded object ok", async () => {
    const { store, iterDir, artifact } = await published();
    const report = await verifyReceipt(iterDir, store);
    expect(report).toMatchObject({
      ok: true,
      problems: [],
      receipt: join(iterDir, ".uploaded"),
      destination: store.identity,
    });
    expect(report.objects.map((o) => o.path).sort()).toEqual([...artifact.files.keys()].sort());
  });

  it("fails a missing object and a replaced object, naming each", async () => {
    const { store, iterDir } = await published();
    await store.delete("model.pt");
    await store.put(".merge-complete.json", text("{ }\n"), { sha256: sha(text("{ }\n")) });
    const report = await verifyReceipt(iterDir, store);
    expect(report.ok).toBe(false);
    expect(report.problems.map((p) => [p.path, p.status])).toEqual([
      [".merge-complete.json", "size_mismatch"],
      ["model.pt", "missing"],
    ]);
    expect(report.problems[1]!.message).toContain("model.pt");
  });

  it("fails an object whose digest metadata is absent", async () => {
    const { store, iterDir, artifact } = await published();
    await store.put("model.pt", artifact.files.get("model.pt")!);
    const report = await verifyReceipt(iterDir, store);
    expect(report.problems).toMatchObject([{ path: "model.pt", status: "digest_absent" }]);
  });
});

describe("verifyReceipt: lying metadata", () => {
  it("fails naming the object whose HEAD reports another digest", async () => {
    const dir = await testdir();
    const store = createMemoryStore({ prefix: "x/iter_000000300" });
    const artifact = makeArtifact();
    await putArchive(store, artifact);
    await writeFile(join(dir, ".uploaded"), receiptFor(artifact, store.identity));
    store.inject({ type: "lieOnHead", key: "model.pt", sha256: E });
    const report = await verifyReceipt(dir, store);
    expect(report).toMatchObject({
      ok: false,
      problems: [{ path: "model.pt", status: "digest_mismatch" }],
    });
    expect(report.problems[0]!.message).toContain(E);
  });
});
