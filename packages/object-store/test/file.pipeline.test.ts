// A file body is copied by a pipeline: chunk i+1 is read while chunk i is hashed on a thread and
// written, in a few shared buffers used in turn. These tests hold it to every guarantee of a put.
import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, truncateSync } from "node:fs";
import { open, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { createFileStore } from "../src/file/store.js";
import { copyFileChecked, copyPlan } from "../src/internal/file-copy.js";
import { terminateHashThreads } from "../src/internal/hash-threads.js";
import type { ObjectStore } from "../src/types.js";

const MiB = 1024 * 1024;
const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Every file under `dir`, relative (payloads, sidecars and any temporary). */
async function tree(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

/** `dir`'s files once a put's cleanup (which may outlast its rejection on abort) has run. */
async function settledTree(dir: string): Promise<string[]> {
  for (let round = 0; round < 100 && (await tree(dir)).length > 0; round++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return tree(dir);
}

describe("copyPlan", () => {
  it("hashes on a thread only when there is more than one chunk to overlap, and not at all without a digest", () => {
    expect(copyPlan(0, "d")).toEqual({ chunkBytes: 1, slots: 1, hashing: "inline" });
    expect(copyPlan(10, "d")).toEqual({ chunkBytes: 10, slots: 2, hashing: "inline" });
    expect(copyPlan(4 * MiB, "d")).toEqual({ chunkBytes: 4 * MiB, slots: 2, hashing: "inline" });
    expect(copyPlan(4 * MiB + 1, "d")).toEqual({ chunkBytes: 4 * MiB, slots: 3, hashing: "thread" });
    expect(copyPlan(13 * MiB + 7, "d")).toEqual({ chunkBytes: 4 * MiB, slots: 4, hashing: "thread" });
    expect(copyPlan(1024 * MiB, undefined)).toMatchObject({ slots: 4, hashing: "none" });
  });
});

describe("a file body's pipelined put", () => {
  let dir: string;
  let root: string;
  let store: ObjectStore;

  beforeEach(async () => {
    dir = await testdir("ckpt-pipeline-");
    root = join(dir, "root");
    store = createFileStore({ root });
  });

  async function source(name: string, size: number): Promise<{ path: string; bytes: Buffer }> {
    const bytes = randomBytes(size);
    const path = join(dir, name);
    await writeFile(path, bytes);
    return { path, bytes };
  }

  it("stores a multi-chunk file with an odd tail bit for bit, checking its sha256, with progress up to its size", async () => {
    const { path, bytes } = await source("big.bin", 13 * MiB + 12_345);
    const progress: number[] = [];
    const info = await store.put(
      "a/big.bin",
      { path },
      { sha256: sha(bytes), onProgress: (done) => progress.push(done) },
    );
    expect(info).toMatchObject({ size: bytes.byteLength, sha256: sha(bytes) });
    expect((await readFile(join(root, "a/big.bin"))).equals(bytes)).toBe(true);
    expect(progress.at(-1)).toBe(bytes.byteLength);
    expect(progress).toEqual([...progress].sort((x, y) => x - y));
  });

  it("refuses a declared sha256 the bytes do not have: STORE_INTEGRITY, no object and no temporary", async () => {
    const { path, bytes } = await source("big.bin", 9 * MiB + 3);
    const wrong = sha(Buffer.concat([bytes, Buffer.from([0])]));
    await expect(store.put("a/big.bin", { path }, { sha256: wrong })).rejects.toMatchObject({
      code: "STORE_INTEGRITY",
    });
    expect(await store.head("a/big.bin")).toBeUndefined();
    expect(await tree(root)).toEqual([]);
  });

  // The reads run at most a few buffers ahead of the writes: changing the file at the first write
  // is seen by a later read.
  it.each([
    ["grows", (path: string) => appendFileSync(path, Buffer.alloc(MiB))],
    ["shrinks", (path: string) => truncateSync(path, 5 * MiB)],
  ])("refuses a file that %s while it is put: STORE_INTEGRITY, nothing left", async (_how, change) => {
    const { path, bytes } = await source("moving.bin", 40 * MiB + 5);
    let changed = false;
    const onProgress = () => {
      if (!changed) change(path);
      changed = true;
    };
    await expect(
      store.put("a/moving.bin", { path }, { sha256: sha(bytes), onProgress }),
    ).rejects.toMatchObject({ code: "STORE_INTEGRITY", message: expect.stringMatching(/declared 41943045/) });
    expect(await tree(root)).toEqual([]);
  });

  it("checks the size itself without a digest: a body that is longer or shorter than declared", async () => {
    const { path } = await source("plain.bin", 9 * MiB);
    const target = await open(join(dir, "copy.bin"), "w");
    try {
      for (const declared of [9 * MiB - 1, 9 * MiB + 1]) {
        await expect(
          copyFileChecked("k", path, declared, undefined, target, new AbortController().signal, () => {}),
        ).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
      }
    } finally {
      await target.close();
    }
  });

  it("reads into a buffer again only after its write is done: a slow target gets the exact bytes", async () => {
    const { path, bytes } = await source("big.bin", 21 * MiB + 99);
    const received: Buffer[] = [];
    // The copy is taken when the write ends: a buffer read into meanwhile would show.
    const slow = {
      write: async (chunk: Uint8Array) => {
        await new Promise((resolve) => setTimeout(resolve, 150));
        received.push(Buffer.from(chunk));
      },
    };
    const written: number[] = [];
    await copyFileChecked("k", path, bytes.byteLength, sha(bytes), slow, new AbortController().signal, (n) =>
      written.push(n),
    );
    expect(Buffer.concat(received).equals(bytes)).toBe(true);
    expect(written.at(-1)).toBe(bytes.byteLength);
  });

  it("stops at an abort mid-put: STORE_ABORTED, no object and no temporary", async () => {
    const { path, bytes } = await source("big.bin", 40 * MiB);
    const controller = new AbortController();
    await expect(
      store.put(
        "a/big.bin",
        { path },
        { sha256: sha(bytes), signal: controller.signal, onProgress: () => controller.abort() },
      ),
    ).rejects.toMatchObject({ code: "STORE_ABORTED" });
    expect(await settledTree(root)).toEqual([]);
    expect(await store.head("a/big.bin")).toBeUndefined();
  });

  it("fails a put whose hashing thread dies mid-file by its key, leaving nothing; the next put starts a new thread", async () => {
    const { path, bytes } = await source("big.bin", 40 * MiB);
    let killed: Promise<void> | undefined;
    const put = store.put(
      "a/big.bin",
      { path },
      { sha256: sha(bytes), onProgress: () => (killed ??= terminateHashThreads()) },
    );
    await expect(put).rejects.toMatchObject({
      code: "STORE_REQUEST_FAILED",
      message: expect.stringMatching(/^put a\/big\.bin: its hashing thread failed \(it exited with code 1\)/),
    });
    await killed;
    expect(await settledTree(root)).toEqual([]);
    expect(await store.head("a/big.bin")).toBeUndefined();
    expect(await store.put("a/big.bin", { path }, { sha256: sha(bytes) })).toMatchObject({
      sha256: sha(bytes),
    });
    expect((await readFile(join(root, "a/big.bin"))).equals(bytes)).toBe(true);
  });

  it("hashes concurrent puts apart: each right digest is accepted, the one wrong digest refused", async () => {
    const sources = await Promise.all(
      [5, 9, 13, 6, 17, 8].map((mib, i) => source(`f${i}.bin`, mib * MiB + i * 1001)),
    );
    const results = await Promise.allSettled(
      sources.map(({ path, bytes }, i) =>
        store.put(`c/f${i}.bin`, { path }, { sha256: i === 3 ? sha(sources[2]!.bytes) : sha(bytes) }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual([
      "fulfilled",
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
    ]);
    expect(results[3]).toMatchObject({ reason: { code: "STORE_INTEGRITY" } });
    for (const [i, { bytes }] of sources.entries()) {
      if (i === 3) continue;
      expect((await readFile(join(root, `c/f${i}.bin`))).equals(bytes)).toBe(true);
    }
    expect((await tree(root)).filter((f) => !f.startsWith(".ckpt-meta/"))).toEqual([
      "c/f0.bin",
      "c/f1.bin",
      "c/f2.bin",
      "c/f4.bin",
      "c/f5.bin",
    ]);
  });
});
