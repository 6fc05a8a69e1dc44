import { join } from "node:path";
import { ARCHIVE_DECLARATION_FILE, sha256Hex } from "@ckpt/manifest";
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
  it("HEADs 8 and uploads 4 at a time by default, and each as asked", async () => {
    const dir = await wideArtifact();
    const wide = counting(createMemoryStore({ faults: slow }));
    const report = await publishArtifact(dir, wide.store);
    expect(report.status).toBe("published");
    expect(wide.peak).toEqual({ head: 8, put: 4 });

    const narrow = counting(createMemoryStore({ faults: slow }));
    await publishArtifact(await wideArtifact(), narrow.store, { headConcurrency: 3, uploadConcurrency: 1 });
    expect(narrow.peak).toEqual({ head: 3, put: 1 });
  });

  it("reads the remote state with concurrent HEADs (a refusal decided on it alone)", async () => {
    const dir = await wideArtifact();
    const memory = createMemoryStore({ faults: slow });
    await memory.createIfAbsent(ARCHIVE_DECLARATION_FILE, new TextEncoder().encode("another inventory"));
    const wide = counting(memory);
    await expect(publishArtifact(dir, wide.store, { headConcurrency: 5 })).rejects.toMatchObject({
      code: "PUBLISH_DECLARATION_CONFLICT",
    });
    expect(memory.calls.filter((c) => c.op === "head")).toHaveLength(SHARDS + 1);
    expect(wide.peak.head).toBe(5);
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

  it("keeps a failed HEAD of the remote state coded, naming its key, before any write", async () => {
    const dir = await wideArtifact();
    const store = createMemoryStore({ faults: [{ type: "fail", op: "head", key: shard(13) }] });
    await expect(publishArtifact(dir, store)).rejects.toMatchObject({
      code: "PUBLISH_STORE_FAILED",
      subject: shard(13),
    });
    expect(store.calls.filter((c) => c.op === "put" || c.op === "createIfAbsent")).toEqual([]);
  });

  it("lets the uploads in flight finish after one fails, starts no other, and the retry resumes after them", async () => {
    const dir = await wideArtifact();
    const store = createMemoryStore({
      faults: [
        { type: "fail", op: "put", key: "model/.metadata", nth: 1 },
        { type: "delay", op: "put", key: shard(0), ms: 30 },
      ],
    });
    await expect(publishArtifact(dir, store, { uploadConcurrency: 2 })).rejects.toMatchObject({
      code: "PUBLISH_STORE_FAILED",
      subject: "model/.metadata",
    });
    // Inventory order: model/.metadata, then model/__0_0.distcp; nothing after them started.
    expect(store.calls.filter((c) => c.op === "put").map((c) => c.key)).toEqual([
      "model/.metadata",
      shard(0),
    ]);
    expect((await store.head(shard(0)))?.sha256).toBe(sha256Hex(payload("shard-0", 512)));
    store.clearCalls();
    const report = await publishArtifact(dir, store, { uploadConcurrency: 2 });
    expect(report.uploaded).not.toContain(shard(0));
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
