import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { STAGED_RECORD } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { expect, it } from "vitest";
import { type FetchEvent, fetchArtifact, fetchArtifactIter } from "../src/index.js";
import { bytes, makeArtifact, putArchive, sha, text } from "./helpers/archive.js";
import { describeEachBackend } from "./helpers/backends.js";
import { recordGets } from "./helpers/recording.js";
import { snapshotTree } from "./helpers/tree.js";

const FIXTURE = join(import.meta.dirname, "fixtures", "dcp-p2");

async function dcpShards(): Promise<Map<string, Uint8Array>> {
  const names = [".metadata", "__0_0.distcp", "__1_0.distcp"];
  return new Map(
    await Promise.all(names.map(async (n) => [n, new Uint8Array(await readFile(join(FIXTURE, n)))] as const)),
  );
}

describeEachBackend("fetchArtifact", (makeStore) => {
  // testdir, not one shared cleanup slot: a test that asks for two roots must remove both.
  const dst = () => testdir("ckpt-fetch-");

  it("stages the model components and the manifest, never the merge records or the diagnostic", async () => {
    const store = await makeStore("consolidated");
    const artifact = makeArtifact({
      trainer: bytes(500, 7),
      extras: new Map([
        [".merge-complete.json", text('{"merge": true}\n')],
        [".posttrain-checkpoint-artifact.legacy.json", text("{}\n")],
        ["merge-diagnostics.json", text("[]\n")],
      ]),
    });
    await putArchive(store, artifact);
    const root = await dst();
    const events: FetchEvent[] = [];
    const manifestPresent: boolean[] = [];
    const fetching = fetchArtifactIter(store, root, { progressBytes: 0 });
    let step = await fetching.next();
    for (; !step.done; step = await fetching.next()) {
      const event = step.value;
      events.push(event);
      if (event.type === "file-done") {
        const at = join(root, "iter_000000300", ".posttrain-checkpoint-artifact.json");
        manifestPresent.push(
          await stat(at).then(
            () => true,
            () => false,
          ),
        );
      }
    }
    const report = step.value;
    const stagedDir = join(root, "iter_000000300");
    expect(report).toMatchObject({
      stagedDir,
      iteration: 300,
      format: "consolidated",
      upToDate: false,
      removed: [],
    });
    expect(report.files.map((f) => [f.path, f.action])).toEqual([
      ["model.pt", "downloaded"],
      ["trainer.pt", "downloaded"],
      [".posttrain-checkpoint-artifact.json", "downloaded"],
    ]);
    expect((await readdir(stagedDir)).sort()).toEqual([
      ".posttrain-checkpoint-artifact.json",
      ".staged.json",
      "model.pt",
      "trainer.pt",
    ]);
    expect(new Uint8Array(await readFile(join(stagedDir, "model.pt")))).toEqual(
      artifact.files.get("model.pt"),
    );
    const record = await STAGED_RECORD.read(join(stagedDir, ".staged.json"));
    expect(record).toMatchObject({
      complete: true,
      iteration: 300,
      source: {
        uri: store.uri,
        destination: store.identity,
        manifest_sha256: sha(artifact.manifestBytes),
        declaration_sha256: sha(artifact.declarationBytes),
      },
    });
    expect(record.files.map((f) => f.path)).toEqual([
      ".posttrain-checkpoint-artifact.json",
      "model.pt",
      "trainer.pt",
    ]);
    // payloads first (the manifest is not on disk when each is done), the manifest last;
    // bytes events add up to what was transferred
    const order = events.filter((e) => e.type === "file-done").map((e) => (e as { path: string }).path);
    expect(order.sort()).toEqual(["model.pt", "trainer.pt"]);
    expect(manifestPresent).toEqual([false, false]);
    const moved = events
      .filter((e) => e.type === "bytes")
      .reduce((n, e) => n + (e as { bytes: number }).bytes, 0);
    expect(moved).toBe(report.downloadedBytes);
    expect(report.downloadedBytes).toBe(3500);
  });

  it("does nothing on a second run over a complete staging of the same source", async () => {
    const store = await makeStore("again");
    await putArchive(store, makeArtifact());
    const root = await dst();
    await fetchArtifact(store, root);
    const before = await snapshotTree(root);
    const recorded = recordGets(store);
    const report = await fetchArtifact(recorded.store, root);
    expect(report).toMatchObject({ upToDate: true, downloadedBytes: 0 });
    expect(recorded.gets.map((g) => g.key).sort()).toEqual([
      ".posttrain-archive.json",
      ".posttrain-checkpoint-artifact.json",
    ]);
    expect(await snapshotTree(root)).toEqual(before);
  });

  it("stages a declared DCP artifact and checks its shards against .metadata", async () => {
    const store = await makeStore("dcp");
    await putArchive(store, makeArtifact({ dcpModel: await dcpShards() }));
    const root = await dst();
    const events: FetchEvent[] = [];
    for await (const event of fetchArtifactIter(store, root)) events.push(event);
    expect(events.filter((e) => e.type === "dcp-check")).toEqual([{ type: "dcp-check", path: "model" }]);
    expect((await readdir(join(root, "iter_000000300", "model"))).sort()).toEqual([
      ".metadata",
      "__0_0.distcp",
      "__1_0.distcp",
    ]);
  });

  it("requires a declared shard that is missing from the archive, and does not mark the staging complete", async () => {
    const store = await makeStore("lost-shard");
    await putArchive(store, makeArtifact({ dcpModel: await dcpShards() }), { omit: ["model/__1_0.distcp"] });
    const root = await dst();
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({
      code: "READER_REMOTE_INCOMPLETE",
      subject: "model/__1_0.distcp",
    });
    const record = await STAGED_RECORD.read(join(root, "iter_000000300", ".staged.json"));
    expect(record.complete).toBe(false);
    expect(record.files.map((f) => f.path)).toContain("model/__1_0.distcp");
    await expect(
      stat(join(root, "iter_000000300", ".posttrain-checkpoint-artifact.json")),
    ).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("refuses a DCP component whose declared shards are too short for its .metadata", async () => {
    const store = await makeStore("short-shard");
    const shards = await dcpShards();
    shards.set("__0_0.distcp", shards.get("__0_0.distcp")!.subarray(0, 100));
    await putArchive(store, makeArtifact({ dcpModel: shards }));
    const root = await dst();
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_DCP_INCOMPLETE" });
    expect((await STAGED_RECORD.read(join(root, "iter_000000300", ".staged.json"))).complete).toBe(false);
  });

  it("refuses a directory holding files without its record, leaving it byte-identical", async () => {
    const store = await makeStore("foreign");
    await putArchive(store, makeArtifact());
    const root = await dst();
    const stagedDir = join(root, "iter_000000300");
    await mkdir(join(stagedDir, "sub"), { recursive: true });
    await writeFile(join(stagedDir, "model.pt"), "someone else's weights");
    await writeFile(join(stagedDir, "sub", "notes.txt"), "keep me");
    const before = await snapshotTree(root);
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({
      code: "READER_STAGE_FOREIGN",
      kind: "refused",
    });
    expect(await snapshotTree(root)).toEqual(before);
  });

  it("treats a killed first record write (only its abandoned temporary left) as its own, and fetches", async () => {
    const store = await makeStore("killed-record");
    await putArchive(store, makeArtifact());
    const root = await dst();
    const stagedDir = join(root, "iter_000000300");
    await mkdir(stagedDir, { recursive: true });
    await writeFile(join(stagedDir, "..staged.json.tmp-999999999-0123456789ab"), '{"schema":');
    await fetchArtifact(store, root);
    expect((await STAGED_RECORD.read(join(stagedDir, ".staged.json"))).complete).toBe(true);
    expect((await readdir(stagedDir)).some((name) => name.includes(".tmp-"))).toBe(false);
  });

  it("clears an abandoned temporary of the native manifest in a staging of its own, and only there", async () => {
    const store = await makeStore("killed-manifest");
    await putArchive(store, makeArtifact());
    const root = await dst();
    const stagedDir = join(root, "iter_000000300");
    // A run killed while completing the copy: its record, the payload, and the manifest's temporary.
    await fetchArtifact(store, root);
    const temporary = join(stagedDir, "..posttrain-checkpoint-artifact.json.tmp-999999999-0123456789ab");
    await writeFile(temporary, '{"schema":');
    const report = await fetchArtifact(store, root);
    expect(report.upToDate).toBe(true);
    expect((await readdir(stagedDir)).some((name) => name.includes(".tmp-"))).toBe(false);
    // Without a record of ours the same file is someone else's: refused, not removed.
    const foreign = await dst();
    await mkdir(join(foreign, "iter_000000300"), { recursive: true });
    await writeFile(
      join(foreign, "iter_000000300", "..posttrain-checkpoint-artifact.json.tmp-999999999-0123456789ab"),
      "x",
    );
    await expect(fetchArtifact(store, foreign)).rejects.toMatchObject({ code: "READER_STAGE_FOREIGN" });
    expect(await readdir(join(foreign, "iter_000000300"))).toHaveLength(1);
  });

  it("still refuses a directory whose leftover temporary belongs to another file", async () => {
    const store = await makeStore("other-temporary");
    await putArchive(store, makeArtifact());
    const root = await dst();
    const stagedDir = join(root, "iter_000000300");
    await mkdir(stagedDir, { recursive: true });
    await writeFile(join(stagedDir, ".notes.txt.tmp-999999999-0123456789ab"), "someone else's");
    const before = await snapshotTree(root);
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_STAGE_FOREIGN" });
    expect(await snapshotTree(root)).toEqual(before);
  });

  it("replaces its own copy of another source, removing only the files its record names", async () => {
    const first = await makeStore("source-a");
    await putArchive(first, makeArtifact({ trainer: bytes(100, 3) }));
    const second = await makeStore("source-b");
    const next = makeArtifact({ model: bytes(2000, 9) });
    await putArchive(second, next);
    const root = await dst();
    await fetchArtifact(first, root);
    const stagedDir = join(root, "iter_000000300");
    await writeFile(join(stagedDir, "operator-notes.txt"), "not ckpt's");
    const report = await fetchArtifact(second, root);
    expect(report.removed).toEqual([".posttrain-checkpoint-artifact.json", "model.pt", "trainer.pt"]);
    expect((await readdir(stagedDir)).sort()).toEqual([
      ".posttrain-checkpoint-artifact.json",
      ".staged.json",
      "model.pt",
      "operator-notes.txt",
    ]);
    expect(new Uint8Array(await readFile(join(stagedDir, "model.pt")))).toEqual(next.files.get("model.pt"));
    expect(await readFile(join(stagedDir, "operator-notes.txt"), "utf8")).toBe("not ckpt's");
    expect((await STAGED_RECORD.read(join(stagedDir, ".staged.json"))).source.uri).toBe(second.uri);
  });

  it("continues a partial .part with a ranged GET and verifies the whole file", async () => {
    const store = await makeStore("part");
    const artifact = makeArtifact({ model: bytes(5000, 4) });
    await putArchive(store, artifact);
    const root = await dst();
    // A first run that ended inside model.pt (no resume in place): its record and the first 1234 bytes.
    const cut = recordGets(store);
    const truncating = {
      ...cut.store,
      get: async (key: string, options?: Parameters<typeof store.get>[1]) => {
        const body = await store.get(key, options);
        if (key !== "model.pt") return body;
        const chunks: Buffer[] = [];
        for await (const c of body) chunks.push(c as Buffer);
        const { Readable } = await import("node:stream");
        return Readable.from([Buffer.concat(chunks).subarray(0, 1234)]);
      },
    };
    await expect(fetchArtifact(truncating, root, { resumeRetries: 0 })).rejects.toMatchObject({
      code: "READER_DOWNLOAD_MISMATCH",
      subject: "model.pt",
    });
    const part = join(root, "iter_000000300", "model.pt.part");
    expect((await stat(part)).size).toBe(1234);
    const recorded = recordGets(store);
    const report = await fetchArtifact(recorded.store, root);
    expect(recorded.gets.filter((g) => g.key === "model.pt")).toEqual([
      { key: "model.pt", range: { start: 1234 } },
    ]);
    expect(report.files.find((f) => f.path === "model.pt")).toMatchObject({ action: "resumed" });
    expect(report.downloadedBytes).toBe(5000 - 1234);
    expect(new Uint8Array(await readFile(join(root, "iter_000000300", "model.pt")))).toEqual(
      artifact.files.get("model.pt"),
    );
    await expect(stat(part)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
