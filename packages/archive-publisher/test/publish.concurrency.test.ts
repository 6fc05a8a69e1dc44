import { join } from "node:path";
import { ARCHIVE_DECLARATION, ARTIFACT_MANIFEST, sha256Hex } from "@ckpt/manifest";
import { createMemoryStore, type MemoryFault, type ObjectStore } from "@ckpt/object-store";
import { describe, expect, it } from "vitest";
import { commitArtifact, type PublishEvent, publishArtifact } from "../src/index.js";
import { describeEachBackend, payload, tempDir, writeTree } from "./helpers.js";

const SHARDS = 20;
const shard = (i: number) => `model/__${i}_0.distcp`;

/** A DCP artifact with many shards (sizes differ, so the byte counts are not symmetric). */
async function wideArtifact(shards = SHARDS): Promise<string> {
  const dir = join(await tempDir(), "iter_000000900");
  const files: Record<string, Uint8Array | string> = { "model/.metadata": "meta" };
  for (let i = 0; i < shards; i++) files[shard(i)] = payload(`shard-${i}`, 512 + i * 37);
  await writeTree(dir, files);
  await commitArtifact(dir, { format: "dcp", components: ["model"] });
  return dir;
}

/** The store, with the peak number of head and put calls in flight at once. */
function counting(store: ObjectStore): { store: ObjectStore; peak: { head: number; put: number } } {
  const peak = { head: 0, put: 0 };
  const now = { head: 0, put: 0 };
  const wrapped = new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop !== "head" && prop !== "put") return typeof value === "function" ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        now[prop]++;
        peak[prop] = Math.max(peak[prop], now[prop]);
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          now[prop]--;
        }
      };
    },
  });
  return { store: wrapped, peak };
}

const slow: MemoryFault[] = [
  { type: "delay", op: "head", ms: 5 },
  { type: "delay", op: "put", ms: 5 },
];

describe("publish concurrency (memory store)", () => {
  it("uploads the largest payloads first", async () => {
    const store = createMemoryStore();
    await publishArtifact(await wideArtifact(), store, { uploadConcurrency: 1 });
    const order = store.calls.filter((c) => c.op === "put").map((c) => c.key);
    expect(order).toEqual([
      ...Array.from({ length: SHARDS }, (_, i) => shard(SHARDS - 1 - i)),
      "model/.metadata",
    ]);
  });

  it("uploads 8 at a time by default and each as asked", async () => {
    const wide = counting(createMemoryStore({ faults: slow }));
    expect((await publishArtifact(await wideArtifact(), wide.store)).status).toBe("published");
    expect(wide.peak.put).toBe(8);
    const narrow = counting(createMemoryStore({ faults: slow }));
    await publishArtifact(await wideArtifact(), narrow.store, { uploadConcurrency: 3 });
    expect(narrow.peak.put).toBe(3);
  });

  it("HEADs the payloads already there headConcurrency at a time when a publish resumes", async () => {
    for (const [headConcurrency, peak] of [
      [undefined, 8],
      [3, 3],
    ] as const) {
      const dir = await wideArtifact();
      const memory = createMemoryStore({
        faults: [...slow, { type: "fail", op: "createIfAbsent", key: ARTIFACT_MANIFEST.fileName }],
      });
      await expect(publishArtifact(dir, memory)).rejects.toMatchObject({ code: "PUBLISH_STORE_FAILED" });
      memory.clearFaults();
      for (const fault of slow) memory.inject(fault);
      memory.clearCalls();
      const resumed = counting(memory);
      const report = await publishArtifact(dir, resumed.store, headConcurrency ? { headConcurrency } : {});
      expect(report).toMatchObject({ status: "published", uploaded: [] });
      expect(memory.calls.filter((c) => c.op === "head")).toHaveLength(SHARDS + 1);
      expect(resumed.peak.head).toBe(peak);
    }
  });

  it("reads a fresh destination with one listing and no HEAD, and HEADs only what is listed at its size", async () => {
    const dir = await wideArtifact();
    const memory = createMemoryStore();
    await memory.createIfAbsent(ARCHIVE_DECLARATION.fileName, new TextEncoder().encode("another inventory"));
    await expect(publishArtifact(dir, memory)).rejects.toMatchObject({
      code: "PUBLISH_DECLARATION_CONFLICT",
    });
    expect(memory.calls.filter((c) => c.op === "head")).toEqual([]);
    expect(memory.calls.filter((c) => c.op === "list")).toHaveLength(1);

    // Shard 0 is there with its bytes and digest, shard 1 with other bytes of another size.
    const fresh = createMemoryStore();
    const zero = payload("shard-0", 512);
    await fresh.put(shard(0), zero, { sha256: sha256Hex(zero) });
    await fresh.put(shard(1), payload("stale", 100));
    fresh.clearCalls();
    const report = await publishArtifact(await wideArtifact(), fresh);
    const heads = fresh.calls.filter((c) => c.op === "head").map((c) => c.key);
    // Before the uploads: shard 0 only; after them: each uploaded payload once.
    expect(heads[0]).toBe(shard(0));
    expect(heads.filter((k) => k === shard(0))).toHaveLength(1);
    expect(report.uploaded).not.toContain(shard(0));
    expect(report.uploaded).toContain(shard(1));
    expect((await fresh.head(shard(1)))?.size).toBe(512 + 37);
  });

  it("reports uploads in inventory order whatever order they finish in", async () => {
    const dir = await wideArtifact();
    // Earlier shards are slower, so they finish after later ones.
    const faults: MemoryFault[] = Array.from({ length: SHARDS }, (_, i) => ({
      type: "delay",
      op: "put",
      key: shard(i),
      ms: (SHARDS - i) * 2,
    }));
    const store = createMemoryStore({ faults });
    const finished: string[] = [];
    const report = await publishArtifact(dir, store, {}, (event: PublishEvent) => {
      if (event.type === "uploaded") finished.push(event.path);
    });
    const expected = report.inventory.map((f) => f.path).filter((p) => p.startsWith("model/"));
    expect(report.uploaded).toEqual(expected);
    expect(finished).not.toEqual(expected);
    expect([...finished].sort()).toEqual([...expected].sort());
  });

  it("counts the bytes of concurrent uploads together, ending at the total", async () => {
    const dir = await wideArtifact();
    const done: number[] = [];
    let total = 0;
    await publishArtifact(dir, createMemoryStore({ faults: slow }), {}, (event: PublishEvent) => {
      if (event.type === "upload") {
        done.push(event.doneBytes);
        total = event.totalBytes;
      }
    });
    expect(total).toBe(4 + Array.from({ length: SHARDS }, (_, i) => 512 + i * 37).reduce((a, b) => a + b));
    expect(done.every((d, i) => i === 0 || d >= done[i - 1]!)).toBe(true);
    expect(done.at(-1)).toBe(total);
  });

  it("keeps a failed listing or HEAD of the remote state coded, naming its key, before any write", async () => {
    const dir = await wideArtifact();
    const unlisted = createMemoryStore({ faults: [{ type: "fail", op: "list" }] });
    await expect(publishArtifact(dir, unlisted)).rejects.toMatchObject({ code: "PUBLISH_STORE_FAILED" });
    expect(unlisted.calls.filter((c) => c.op === "put" || c.op === "createIfAbsent")).toEqual([]);

    const store = createMemoryStore({ faults: [{ type: "fail", op: "head", key: shard(13) }] });
    const thirteen = payload("shard-13", 512 + 13 * 37);
    await store.put(shard(13), thirteen, { sha256: sha256Hex(thirteen) });
    store.clearCalls();
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_STORE_FAILED",
      subject: shard(13),
    });
    expect(store.calls.filter((c) => c.op === "put" || c.op === "createIfAbsent")).toEqual([]);
  });

  it("after one upload fails those in flight finish, no other starts, and the retry resumes", async () => {
    const dir = await wideArtifact();
    // Shard sizes grow with the index: 19 goes first, then 18.
    const store = createMemoryStore({
      faults: [
        { type: "fail", op: "put", key: shard(19), nth: 1 },
        { type: "delay", op: "put", key: shard(18), ms: 30 },
      ],
    });
    await expect(publishArtifact(dir, store, { uploadConcurrency: 2 })).rejects.toMatchObject({
      code: "PUBLISH_STORE_FAILED",
      subject: shard(19),
    });
    // Both started (in either order: each stats its file first); nothing else did.
    expect(
      store.calls
        .filter((c) => c.op === "put")
        .map((c) => c.key)
        .sort(),
    ).toEqual([shard(18), shard(19)]);
    expect((await store.head(shard(18)))?.sha256).toBe(sha256Hex(payload("shard-18", 512 + 18 * 37)));
    store.clearCalls();
    const report = await publishArtifact(dir, store, { uploadConcurrency: 2 });
    expect(report.uploaded).not.toContain(shard(18));
    expect(report.uploaded).toHaveLength(SHARDS);
  });
});

describeEachBackend("publish of a wide artifact", (backend) => {
  it("uploads every shard concurrently and verifies each", async () => {
    const dir = await wideArtifact(12);
    const store = await backend().open(`wide-${backend().name}`);
    const report = await publishArtifact(dir, store, { uploadConcurrency: 4, headConcurrency: 8 });
    expect(report.status).toBe("published");
    expect(report.uploaded).toHaveLength(13);
    for (const file of report.inventory) {
      expect(await store.head(file.path), file.path).toMatchObject({ size: file.size, sha256: file.sha256 });
    }
    expect((await publishArtifact(dir, store)).status).toBe("skipped");
  });
});
