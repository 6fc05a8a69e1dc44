import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../src/memory/store.js";

const text = (s: string) => new TextEncoder().encode(s);

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks).toString();
}

describe("memory store fault injection", () => {
  it("retries a transient failure of the nth call like a real backend, and logs every attempt", async () => {
    const store = createMemoryStore({ faults: [{ type: "fail", op: "put", nth: 2, transient: true }] });
    await store.put("a", text("1"));
    await store.put("b", text("2"));
    expect(store.calls.map((c) => [c.op, c.key, c.attempt, c.faults])).toEqual([
      ["put", "a", 1, []],
      ["put", "b", 1, ["fail"]],
      ["put", "b", 2, []],
    ]);
    expect(store.calls.map((c) => c.seq)).toEqual([1, 2, 3]);
  });

  it("surfaces a permanent failure, and a transient one that outlasts the retries", async () => {
    const store = createMemoryStore({ faults: [{ type: "fail", op: "head", key: "k" }] });
    await expect(store.head("k")).rejects.toMatchObject({ code: "STORE_REQUEST_FAILED", kind: "failed" });
    await expect(store.head("other")).resolves.toBeUndefined();

    const flaky = createMemoryStore({
      retry: { retries: 2 },
      faults: [{ type: "fail", op: "get", transient: true }],
    });
    await flaky.put("k", text("x"));
    await expect(flaky.get("k")).rejects.toMatchObject({ code: "STORE_TRANSIENT", kind: "transient" });
    expect(flaky.calls.filter((c) => c.op === "get")).toHaveLength(3);
  });

  it("truncates a GET body without an error", async () => {
    const store = createMemoryStore({ faults: [{ type: "truncateGet", bytes: 3 }] });
    await store.put("k", text("abcdefgh"));
    expect(await readAll(await store.get("k"))).toBe("abc");
    expect(await readAll(await store.get("k", { range: { start: 4 } }))).toBe("efg");
  });

  it("overwrites on createIfAbsent when told to ignore the conditional header", async () => {
    const store = createMemoryStore({ faults: [{ type: "ignoreConditional", nth: 2 }] });
    await store.createIfAbsent("k", text("first"));
    await expect(store.createIfAbsent("k", text("second"))).resolves.toMatchObject({ status: "created" });
    expect(await readAll(await store.get("k"))).toBe("second");
    await expect(store.createIfAbsent("k", text("third"))).resolves.toMatchObject({ status: "exists" });
  });

  it("lies about sha256 and size on HEAD only", async () => {
    const store = createMemoryStore({
      faults: [{ type: "lieOnHead", key: "k", sha256: "f".repeat(64), size: 99 }],
    });
    await store.put("k", text("abc"));
    await expect(store.head("k")).resolves.toMatchObject({ sha256: "f".repeat(64), size: 99 });
    expect(await readAll(await store.get("k"))).toBe("abc");
  });

  it("delays a call, and the per-call timeout turns a long delay into STORE_TIMEOUT", async () => {
    const store = createMemoryStore({
      retry: { retries: 0 },
      faults: [{ type: "delay", op: "head", ms: 30 }],
    });
    const started = Date.now();
    await store.head("k");
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    await expect(store.head("k", { timeoutMs: 5 })).rejects.toMatchObject({ code: "STORE_TIMEOUT" });
  });

  it("can gain and lose faults during a test", async () => {
    const store = createMemoryStore();
    store.inject({ type: "fail", op: "delete" });
    await expect(store.delete("k")).rejects.toMatchObject({ code: "STORE_REQUEST_FAILED" });
    store.clearFaults();
    await store.delete("k");
    store.clearCalls();
    expect(store.calls).toEqual([]);
  });

  it("records multipart puts with their part count and reports progress per part", async () => {
    const store = createMemoryStore();
    const progress: number[] = [];
    await store.put("big", Buffer.alloc(2500), {
      multipartThreshold: 1000,
      partSize: 1000,
      onProgress: (n) => progress.push(n),
    });
    await store.put("small", Buffer.alloc(10));
    expect(store.calls.map((c) => c.parts)).toEqual([3, 1]);
    expect(progress).toEqual([1000, 2000, 2500]);
  });

  it("refuses a body whose sha256 differs from the declared one", async () => {
    const store = createMemoryStore();
    await expect(store.put("k", text("abc"), { sha256: "0".repeat(64) })).rejects.toMatchObject({
      code: "STORE_INTEGRITY",
    });
    await expect(
      store.put("k", { stream: Readable.from([Buffer.from("abcdef")]), size: 3 }),
    ).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
    await expect(store.head("k")).resolves.toBeUndefined();
  });
});
