import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { testdir } from "@ckpt/test-utils";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CreateResult, ObjectInfo, ObjectStore } from "../src/types.js";
import { parseStoreUri } from "../src/uri.js";

/** A store under test and how to dispose of it (remove its directory, empty its prefix...). */
export interface StoreFixture {
  readonly store: ObjectStore;
  readonly cleanup: () => Promise<void>;
}

/** S3 refuses parts below 5 MiB (except the last), so the multipart case uses 5 MiB parts. */
const PART = 5 * 1024 * 1024;

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

async function collect(iterable: AsyncIterable<ObjectInfo>): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const info of iterable) out.push(info);
  return out;
}

const text = (s: string) => new TextEncoder().encode(s);

/**
 * The behaviour every ObjectStore backend must show, run unchanged against each one. `makeStore`
 * is called before every test and must return an empty store (a fresh directory, a fresh prefix).
 */
export function describeStoreContract(name: string, makeStore: () => Promise<StoreFixture>): void {
  describe(`ObjectStore contract: ${name}`, () => {
    let store: ObjectStore;
    let cleanup: () => Promise<void>;

    beforeEach(async () => {
      ({ store, cleanup } = await makeStore());
    });
    afterEach(async () => {
      await cleanup();
    });

    describe("identity", () => {
      it("has a URI that parses back to its identity and holds no secret", () => {
        const parsed = parseStoreUri(store.uri);
        expect(parsed.scheme).toBe(store.identity.scheme);
        expect(parsed.bucket).toBe(store.identity.bucket);
        expect(parsed.prefix).toBe(store.identity.prefix);
        expect(store.uri).not.toContain("@");
      });
    });

    describe("createIfAbsent", () => {
      it("creates once, then reports the existing object and keeps the first body", async () => {
        const first = await store.createIfAbsent("records/decl.json", text("first"), {
          sha256: sha256(text("first")),
        });
        expect(first).toMatchObject({ status: "created", info: { key: "records/decl.json", size: 5 } });
        const second = await store.createIfAbsent("records/decl.json", text("second body"));
        expect(second).toMatchObject({ status: "exists", info: { key: "records/decl.json", size: 5 } });
        expect(second.info.sha256).toBe(sha256(text("first")));
        expect((await readAll(await store.get("records/decl.json"))).toString()).toBe("first");
      });

      it("lets exactly one of 16 concurrent creates of one key win, and keeps the winner's body", async () => {
        const results: CreateResult[] = await Promise.all(
          Array.from({ length: 16 }, (_, i) => store.createIfAbsent("race/once", text(`body-${i}`))),
        );
        const winners = results.flatMap((r, i) => (r.status === "created" ? [i] : []));
        expect(winners).toHaveLength(1);
        expect(results.filter((r) => r.status === "exists")).toHaveLength(15);
        expect((await readAll(await store.get("race/once"))).toString()).toBe(`body-${winners[0]}`);
      });

      it("refuses to create over an object written by put", async () => {
        await store.put("records/x", text("put"));
        await expect(store.createIfAbsent("records/x", text("create"))).resolves.toMatchObject({
          status: "exists",
        });
        expect((await readAll(await store.get("records/x"))).toString()).toBe("put");
      });
    });

    describe("put / head / get", () => {
      it("round-trips bytes, sha256 and user metadata", async () => {
        const body = randomBytes(1000);
        const info = await store.put("iter_000000100/model.safetensors", body, {
          sha256: sha256(body),
          metadata: { "run-id": "r1" },
        });
        expect(info).toMatchObject({
          key: "iter_000000100/model.safetensors",
          size: 1000,
          sha256: sha256(body),
        });
        const head = await store.head("iter_000000100/model.safetensors");
        expect(head).toMatchObject({
          key: "iter_000000100/model.safetensors",
          size: 1000,
          sha256: sha256(body),
        });
        expect(head?.metadata["run-id"]).toBe("r1");
        expect((await readAll(await store.get("iter_000000100/model.safetensors"))).equals(body)).toBe(true);
      });

      it("overwrites with put", async () => {
        await store.put("k", text("one"), { sha256: sha256(text("one")) });
        await store.put("k", text("second"));
        const head = await store.head("k");
        expect(head?.size).toBe(6);
        expect(head?.sha256).toBeUndefined();
        expect((await readAll(await store.get("k"))).toString()).toBe("second");
      });

      it("stores an empty object", async () => {
        await store.put("empty", new Uint8Array(0));
        expect((await store.head("empty"))?.size).toBe(0);
        expect((await readAll(await store.get("empty"))).length).toBe(0);
      });

      it("answers undefined for a missing head and STORE_NOT_FOUND for a missing get", async () => {
        await expect(store.head("absent/key")).resolves.toBeUndefined();
        await expect(store.get("absent/key")).rejects.toMatchObject({ code: "STORE_NOT_FOUND" });
        await expect(store.get("absent/key", { range: { start: 0, end: 1 } })).rejects.toMatchObject({
          code: "STORE_NOT_FOUND",
        });
      });

      it("uploads a sized stream body", async () => {
        const parts = [randomBytes(100), randomBytes(3000), randomBytes(1)];
        const all = Buffer.concat(parts);
        const info = await store.put("streamed", { stream: Readable.from(parts), size: all.length });
        expect(info.size).toBe(all.length);
        expect((await readAll(await store.get("streamed"))).equals(all)).toBe(true);
      });

      it("uploads an unsized stream body, under and past the multipart threshold, part by part", async () => {
        const small = [randomBytes(100), randomBytes(7)];
        const info = await store.put("unsized-small", { stream: Readable.from(small) });
        expect(info.size).toBe(107);
        expect((await readAll(await store.get("unsized-small"))).equals(Buffer.concat(small))).toBe(true);
        // 5 MiB parts (the S3 minimum), a threshold of 1 MiB: three parts, the last one short.
        const big = Array.from({ length: 11 }, () => randomBytes(1024 * 1024 + 17));
        const all = Buffer.concat(big);
        const options = { multipartThreshold: 1024 * 1024, partSize: 5 * 1024 * 1024 };
        const bigInfo = await store.put("unsized-big", { stream: Readable.from(big) }, options);
        expect(bigInfo.size).toBe(all.length);
        const back = await readAll(await store.get("unsized-big"));
        expect(back.length).toBe(all.length);
        expect(back.equals(all)).toBe(true);
        expect((await store.head("unsized-big"))?.size).toBe(all.length);
      });

      it("refuses a stream that delivers fewer bytes than declared, leaving nothing behind", async () => {
        const p = store.put("short", { stream: Readable.from([randomBytes(10)]), size: 20 });
        await expect(p).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
        await expect(store.head("short")).resolves.toBeUndefined();
      });

      it("refuses malformed sha256 and metadata names", async () => {
        await expect(store.put("m", text("x"), { sha256: "ABC" })).rejects.toMatchObject({
          code: "STORE_INVALID_METADATA",
        });
        await expect(store.put("m", text("x"), { metadata: { "Bad Name": "v" } })).rejects.toMatchObject({
          code: "STORE_INVALID_METADATA",
        });
        await expect(store.head("m")).resolves.toBeUndefined();
      });

      it("uploads a large file by path in parts, reporting progress up to its size", async () => {
        const dir = await testdir("ckpt-contract-");
        const body = randomBytes(2 * PART + 12_345);
        const path = join(dir, "model.pt");
        await writeFile(path, body);
        const progress: number[] = [];
        const info = await store.put(
          "big/model.pt",
          { path },
          {
            sha256: sha256(body),
            multipartThreshold: PART,
            partSize: PART,
            onProgress: (bytes) => progress.push(bytes),
          },
        );
        expect(info.size).toBe(body.length);
        expect((await store.head("big/model.pt"))?.sha256).toBe(sha256(body));
        expect(sha256(await readAll(await store.get("big/model.pt")))).toBe(sha256(body));
        expect(progress.at(-1)).toBe(body.length);
        expect(progress).toEqual([...progress].sort((a, b) => a - b));
      });
    });

    describe("ranged get", () => {
      const body = Uint8Array.from({ length: 256 }, (_, i) => i);
      const slice = async (range: { start: number; end?: number }) => [
        ...(await readAll(await store.get("r", { range }))),
      ];

      beforeEach(async () => {
        await store.put("r", body);
      });

      it("reads from a start, a start-end window, the last byte, and clamps an end past the size", async () => {
        expect(await slice({ start: 250 })).toEqual([250, 251, 252, 253, 254, 255]);
        expect(await slice({ start: 10, end: 14 })).toEqual([10, 11, 12, 13]);
        expect(await slice({ start: 255 })).toEqual([255]);
        expect(await slice({ start: 255, end: 256 })).toEqual([255]);
        expect(await slice({ start: 0, end: 1 })).toEqual([0]);
        expect(await slice({ start: 253, end: 10_000 })).toEqual([253, 254, 255]);
      });

      it("returns an empty body for an empty range and for a start at the end", async () => {
        expect(await slice({ start: 7, end: 7 })).toEqual([]);
        expect(await slice({ start: 256 })).toEqual([]);
        expect(await slice({ start: 256, end: 256 })).toEqual([]);
      });

      it("refuses a start past the end, an end before the start and negative bounds", async () => {
        for (const range of [{ start: 257 }, { start: 5, end: 4 }, { start: -1 }, { start: 1.5 }]) {
          await expect(store.get("r", { range })).rejects.toMatchObject({ code: "STORE_INVALID_RANGE" });
        }
      });
    });

    describe("list", () => {
      it("follows pagination with a small page size and returns keys sorted, filtered by prefix", async () => {
        const keys = Array.from({ length: 50 }, (_, i) => `many/k-${String(i).padStart(2, "0")}`);
        await Promise.all(keys.map((k, i) => store.put(k, text("x".repeat(i)))));
        await store.put("other/k", text("o"));
        await store.put("manyx", text("o"));
        const listed = await collect(store.list("many/", { pageSize: 7 }));
        expect(listed.map((i) => i.key)).toEqual(keys);
        expect(listed.map((i) => i.size)).toEqual(keys.map((_, i) => i));
        expect((await collect(store.list("many/k-1", { pageSize: 3 }))).map((i) => i.key)).toEqual(
          keys.slice(10, 20),
        );
        expect(await collect(store.list("absent/"))).toEqual([]);
      });

      it("lists everything with an empty prefix, in byte order across directory levels", async () => {
        for (const k of ["a0", "a/b", "a-b", "a/a/z", "b"]) await store.put(k, text(k));
        expect((await collect(store.list(""))).map((i) => i.key)).toEqual(["a-b", "a/a/z", "a/b", "a0", "b"]);
        expect((await collect(store.list("a"))).map((i) => i.key)).toEqual(["a-b", "a/a/z", "a/b", "a0"]);
        expect((await collect(store.list("a/"))).map((i) => i.key)).toEqual(["a/a/z", "a/b"]);
      });
    });

    describe("delete", () => {
      it("removes an object and tolerates a missing one", async () => {
        await store.put("d/one", text("1"));
        await store.put("d/two", text("2"));
        await store.delete("d/one");
        await expect(store.head("d/one")).resolves.toBeUndefined();
        await store.delete("d/one");
        await store.delete("never/existed");
        expect((await collect(store.list("d/"))).map((i) => i.key)).toEqual(["d/two"]);
        await expect(store.createIfAbsent("d/one", text("again"))).resolves.toMatchObject({
          status: "created",
        });
      });
    });

    describe("key validation", () => {
      const badKeys = [
        "",
        "/abs",
        "a//b",
        "a/",
        "./a",
        "a/../b",
        "..",
        "a\\b",
        "nul\u0000",
        "x".repeat(1100),
        ".ckpt-meta/x",
        "a/.ckpt-tmp.1",
      ];

      it.each(badKeys.map((k) => [JSON.stringify(k).slice(0, 30), k]))(
        "refuses %s on every operation with STORE_INVALID_KEY",
        async (_label, key) => {
          const invalid = { code: "STORE_INVALID_KEY" };
          await expect(store.createIfAbsent(key, text("x"))).rejects.toMatchObject(invalid);
          await expect(store.put(key, text("x"))).rejects.toMatchObject(invalid);
          await expect(store.head(key)).rejects.toMatchObject(invalid);
          await expect(store.get(key)).rejects.toMatchObject(invalid);
          await expect(store.delete(key)).rejects.toMatchObject(invalid);
        },
      );

      it("refuses an absolute list prefix", async () => {
        await expect(collect(store.list("/abs"))).rejects.toMatchObject({ code: "STORE_INVALID_KEY" });
      });
    });

    describe("abort", () => {
      it("rejects every operation with STORE_ABORTED when the signal is already aborted", async () => {
        await store.put("present", text("p"));
        const signal = AbortSignal.abort();
        const aborted = { code: "STORE_ABORTED" };
        await expect(store.put("a/put", text("x"), { signal })).rejects.toMatchObject(aborted);
        await expect(store.createIfAbsent("a/create", text("x"), { signal })).rejects.toMatchObject(aborted);
        await expect(store.head("present", { signal })).rejects.toMatchObject(aborted);
        await expect(store.get("present", { signal })).rejects.toMatchObject(aborted);
        await expect(store.delete("present", { signal })).rejects.toMatchObject(aborted);
        await expect(collect(store.list("", { signal }))).rejects.toMatchObject(aborted);
        await expect(store.head("a/put")).resolves.toBeUndefined();
        await expect(store.head("a/create")).resolves.toBeUndefined();
        await expect(store.head("present")).resolves.toMatchObject({ size: 1 });
      });

      it("aborts an upload in flight and leaves no object", async () => {
        const controller = new AbortController();
        const endless = new Readable({
          read() {
            setTimeout(() => this.push(Buffer.alloc(64 * 1024)), 5);
          },
        });
        setTimeout(() => controller.abort(), 100);
        const p = store.put(
          "a/slow",
          { stream: endless, size: 1024 * 1024 * 1024 },
          { signal: controller.signal },
        );
        await expect(p).rejects.toMatchObject({ code: "STORE_ABORTED" });
        endless.destroy();
        await expect(store.head("a/slow")).resolves.toBeUndefined();
      });
    });
  });
}
