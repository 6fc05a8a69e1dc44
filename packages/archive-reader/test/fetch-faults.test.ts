import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { STAGED_RECORD } from "@ckpt/manifest";
import { createMemoryStore, type MemoryStore } from "@ckpt/object-store";
import { drain } from "@ckpt/progress";
import { makeTempDir } from "@ckpt/test-utils";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fetchArtifact, fetchArtifactIter } from "../src/index.js";
import { bytes, makeArtifact, putArchive, sha, text } from "./helpers/archive.js";

const PREFIX = "proj/g/run/20260901120000/checkpoint_artifacts/iter_000000300";
let root = "";
let cleanup = async () => {};
beforeEach(async () => {
  ({ dir: root, cleanup } = await makeTempDir("ckpt-fetch-faults-"));
});
afterEach(() => cleanup());
const staged = (...p: string[]) => join(root, "iter_000000300", ...p);
const gets = (store: MemoryStore) => store.calls.filter((c) => c.op === "get").map((c) => c.key);

describe("fetch under faults (memory store)", () => {
  it("continues a body cut mid-stream in place, by a ranged GET from the bytes written, in the same run", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const artifact = makeArtifact({ model: bytes(4000, 2), trainer: bytes(300, 5) });
    await putArchive(store, artifact);
    store.inject({ type: "truncateGet", key: "model.pt", nth: 1, bytes: 1000 });
    store.inject({ type: "truncateGet", key: "model.pt", nth: 2, bytes: 1500 });
    const resumes: Array<{ from: number; attempt: number }> = [];
    const report = await drain(fetchArtifactIter(store, root, { resumeDelayMs: () => 0 }), (event) => {
      if (event.type === "resume") resumes.push({ from: event.from, attempt: event.attempt });
    });
    expect(resumes).toEqual([
      { from: 1000, attempt: 1 },
      { from: 2500, attempt: 1 },
    ]);
    expect(report).toMatchObject({ resumedInPlace: 2, downloadedBytes: 4300 });
    expect(gets(store).filter((k) => k === "model.pt")).toHaveLength(3);
    expect(new Uint8Array(await readFile(staged("model.pt")))).toEqual(artifact.files.get("model.pt"));
    expect((await STAGED_RECORD.read(staged(".staged.json"))).complete).toBe(true);
  });

  it("gives up after resumeRetries breaks without progress, keeping the .part for the next run", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const artifact = makeArtifact({ model: bytes(4000, 2) });
    await putArchive(store, artifact);
    store.inject({ type: "truncateGet", key: "model.pt", nth: 1, bytes: 1000 });
    store.inject({ type: "truncateGet", key: "model.pt", nth: 2, times: 100, bytes: 0 });
    await expect(
      fetchArtifact(store, root, { resumeRetries: 3, resumeDelayMs: () => 0 }),
    ).rejects.toMatchObject({
      code: "READER_DOWNLOAD_MISMATCH",
      subject: "model.pt",
      message: expect.stringContaining("ended after 1000 of 4000 bytes"),
    });
    // The first GET, then three resumes in a row (the last two without progress): the fourth break ends it.
    expect(gets(store).filter((k) => k === "model.pt")).toHaveLength(4);
    expect((await stat(staged("model.pt.part"))).size).toBe(1000);
    expect((await STAGED_RECORD.read(staged(".staged.json"))).complete).toBe(false);
    await expect(stat(staged(".posttrain-checkpoint-artifact.json"))).rejects.toMatchObject({
      code: "ENOENT",
    });
    store.clearFaults();
    const report = await fetchArtifact(store, root);
    expect(report.files[0]).toMatchObject({ path: "model.pt", action: "resumed" });
    expect(report.downloadedBytes).toBe(3000);
  });

  it("with resumeRetries 0 fails at the first break", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ model: bytes(4000, 2) }));
    store.inject({ type: "truncateGet", key: "model.pt", nth: 1, bytes: 1000 });
    await expect(fetchArtifact(store, root, { resumeRetries: 0 })).rejects.toMatchObject({
      code: "READER_DOWNLOAD_MISMATCH",
    });
    expect(gets(store).filter((k) => k === "model.pt")).toHaveLength(1);
  });

  it("does not resume bytes that are wrong: a digest mismatch after a resume discards the .part", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ model: bytes(4000, 2) }));
    store.inject({ type: "truncateGet", key: "model.pt", nth: 1, bytes: 1000 });
    await store.put("model.pt", bytes(4000, 9)); // same size, other bytes than declared
    await expect(fetchArtifact(store, root, { resumeDelayMs: () => 0 })).rejects.toMatchObject({
      code: "READER_DOWNLOAD_MISMATCH",
      message: expect.stringContaining("has sha256"),
    });
    await expect(stat(staged("model.pt.part"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("after a failure mid-fetch, a rerun downloads only the rest", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ model: bytes(4000, 2), trainer: bytes(300, 5) }));
    store.inject({ type: "fail", op: "get", key: "trainer.pt" });
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "STORE_REQUEST_FAILED" });
    expect((await stat(staged("model.pt"))).size).toBe(4000);
    store.clearFaults();
    store.clearCalls();
    const report = await fetchArtifact(store, root);
    expect(gets(store).sort()).toEqual([
      ".posttrain-archive.json",
      ".posttrain-checkpoint-artifact.json",
      "trainer.pt",
    ]);
    expect(report.files.map((f) => [f.path, f.action])).toEqual([
      ["model.pt", "kept"],
      ["trainer.pt", "downloaded"],
      [".posttrain-checkpoint-artifact.json", "downloaded"],
    ]);
    expect((await STAGED_RECORD.read(staged(".staged.json"))).complete).toBe(true);
  });

  it("re-downloads a staged file whose bytes changed since, keeping the others", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const artifact = makeArtifact({ model: bytes(4000, 2), trainer: bytes(300, 5) });
    await putArchive(store, artifact);
    await fetchArtifact(store, root);
    const damaged = new Uint8Array(artifact.files.get("model.pt")!);
    damaged[10] = (damaged[10]! + 1) % 256;
    const { writeFile } = await import("node:fs/promises");
    await writeFile(staged("model.pt"), damaged);
    store.clearCalls();
    const report = await fetchArtifact(store, root);
    expect(report.upToDate).toBe(false);
    expect(gets(store)).toContain("model.pt");
    expect(gets(store)).not.toContain("trainer.pt");
    expect(new Uint8Array(await readFile(staged("model.pt")))).toEqual(artifact.files.get("model.pt"));
  });

  it("refuses bytes whose digest differs from the declaration and removes the .part", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const artifact = makeArtifact({ model: bytes(4000, 2) });
    await putArchive(store, artifact);
    await store.put("model.pt", bytes(4000, 3));
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({
      code: "READER_DOWNLOAD_MISMATCH",
      subject: "model.pt",
    });
    await expect(stat(staged("model.pt.part"))).rejects.toMatchObject({ code: "ENOENT" });
    expect((await STAGED_RECORD.read(staged(".staged.json"))).complete).toBe(false);
  });

  it("refuses an object longer than its declared size while streaming", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ model: bytes(4000, 2) }));
    await store.put("model.pt", bytes(4100, 2));
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_DOWNLOAD_MISMATCH" });
    await expect(stat(staged("model.pt.part"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("downloads shards in parallel; a caller that stops early leaves a staging the next run completes", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const shards = new Map(
      Array.from({ length: 8 }, (_, i) => [`__${i}_0.distcp`, bytes(700 + i, i + 1)] as const),
    );
    await putArchive(store, makeArtifact({ dcpModel: new Map([[".metadata", bytes(5)], ...shards]) }));
    store.inject({ type: "delay", op: "get", ms: 20 });
    let finished = 0;
    for await (const event of fetchArtifactIter(store, root, { concurrency: 3 })) {
      if (event.type === "file-done" && ++finished === 2) break;
    }
    expect((await STAGED_RECORD.read(staged(".staged.json"))).complete).toBe(false);
    // two records, then more files started than a sequential fetch would have by its second file
    const started = store.calls.filter((c) => c.op === "get").length;
    expect(started).toBeGreaterThanOrEqual(3 + 2);
    store.clearFaults();
    store.clearCalls();
    // the .metadata is not a real DCP file, so the completed download is refused at the DCP check
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_DCP_INCOMPLETE" });
    const again = gets(store).filter((k) => k.startsWith("model/"));
    expect(again.length).toBeLessThan(9);
    expect(again.length).toBeGreaterThan(0);
  });

  it("an abort while a GET is in flight ends as READER_ABORTED caused by the store's abort", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ model: bytes(4000, 2) }));
    store.inject({ type: "delay", op: "get", key: "model.pt", ms: 5000 });
    const controller = new AbortController();
    const error = await drain(fetchArtifactIter(store, root, { signal: controller.signal }), (event) => {
      if (event.type === "file-start") controller.abort(new Error("SIGINT received"));
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "READER_ABORTED", cause: { code: "STORE_ABORTED" } });
  });

  it("stops when aborted, before any request", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const controller = new AbortController();
    controller.abort();
    await expect(fetchArtifact(store, root, { signal: controller.signal })).rejects.toMatchObject({
      code: "READER_ABORTED",
    });
    expect(store.calls).toEqual([]);
  });
});

describe("fetch: what the archive must prove", () => {
  it("refuses an archive without its native manifest (unfinished)", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact(), { omit: [".posttrain-checkpoint-artifact.json"] });
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_REMOTE_INCOMPLETE" });
  });

  it("refuses a declaration bound to other manifest bytes", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const artifact = makeArtifact();
    await putArchive(store, artifact);
    await store.put(".posttrain-archive.json", makeArtifact({ model: bytes(10) }).declarationBytes);
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_DECLARATION_MISMATCH" });
  });

  it("refuses malformed records with the object named", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await store.put(".posttrain-checkpoint-artifact.json", text('{"schema": 1}'));
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({
      code: "READER_REMOTE_RECORD_INVALID",
      subject: ".posttrain-checkpoint-artifact.json",
    });
  });

  it("refuses a prefix naming another iteration than the manifest", async () => {
    const store = createMemoryStore({ prefix: "run/checkpoint_artifacts/iter_000000400" });
    await putArchive(store, makeArtifact());
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_REMOTE_RECORD_INVALID" });
  });

  it("reads a legacy file artifact whose manifest carries digests", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact(), { withoutDeclaration: true, withoutDigestMetadata: true });
    const report = await fetchArtifact(store, root);
    expect(report).toMatchObject({ declarationSha256: null });
    expect((await STAGED_RECORD.read(staged(".staged.json"))).source.declaration_sha256).toBeNull();
  });

  it("reads a legacy file artifact whose object metadata carries the digests", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    const artifact = makeArtifact({ manifestWithoutDigests: true });
    await putArchive(store, artifact, { withoutDeclaration: true });
    const report = await fetchArtifact(store, root);
    expect(report.files[0]).toMatchObject({ path: "model.pt", sha256: sha(artifact.files.get("model.pt")!) });
  });

  it("refuses a legacy artifact with no digest anywhere as unverifiable", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ manifestWithoutDigests: true }), {
      withoutDeclaration: true,
      withoutDigestMetadata: true,
    });
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({
      code: "READER_UNVERIFIABLE",
      subject: "model.pt",
    });
  });

  it("refuses a legacy DCP artifact without a declaration before downloading anything", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ dcpModel: new Map([[".metadata", bytes(10)]]) }), {
      withoutDeclaration: true,
    });
    store.clearCalls();
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_LEGACY_DCP_UNPROVABLE" });
    expect(gets(store).sort()).toEqual([".posttrain-archive.json", ".posttrain-checkpoint-artifact.json"]);
  });
});
