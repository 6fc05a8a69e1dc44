import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { appendFileSync, constants, truncateSync } from "node:fs";
import { mkdir, open, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { hashPath, hashPathSync } from "./core.js";
import type { HashProgressEvent } from "./engine.js";
import { hashDirectory, hashFile, hashFiles, hashFilesTuned, sha256Hex } from "./hash.js";

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const openssl = (path: string) =>
  execFileSync("openssl", ["dgst", "-sha256", "-r", path], { encoding: "utf8" }).split(" ")[0];

const CHUNK = 64 * 1024;
// Workers on small files: the default only starts a thread for tens of MiB of work.
const EAGER_WORKERS = { workerMinBytes: 0 };

describe("sha256Hex", () => {
  it("hashes bytes and UTF-8 strings", () => {
    expect(sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(sha256Hex(new Uint8Array([0x61, 0x62, 0x63]))).toBe(sha256Hex("abc"));
  });
});

describe("hashFile", () => {
  const sizes = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 17];
  it.each(sizes)("matches openssl and node crypto for %i bytes (chunk 64 KiB)", async (size) => {
    const dir = await testdir();
    const path = join(dir, "f.bin");
    const bytes = randomBytes(size);
    await writeFile(path, bytes);
    const digest = await hashFile(path, { chunkSize: CHUNK });
    expect(digest).toEqual({ size, sha256: sha(bytes) });
    expect(digest.sha256).toBe(openssl(path));
  });

  it("refuses a directory and names a missing file", async () => {
    const dir = await testdir();
    await expect(hashFile(dir)).rejects.toMatchObject({ code: "HASH_SPECIAL_FILE_REFUSED", file: dir });
    const missing = join(dir, "missing.bin");
    const error = await hashFile(missing).catch((e: unknown) => e);
    expect(error).toMatchObject({
      name: "ManifestError",
      code: "HASH_READ_FAILED",
      kind: "failed",
      file: missing,
    });
    expect((error as Error).message).toContain(missing);
  });

  it("rejects bad options as input errors", async () => {
    const dir = await testdir();
    const path = join(dir, "f.bin");
    await writeFile(path, "x");
    await expect(hashFile(path, { chunkSize: 1000 })).rejects.toMatchObject({
      code: "HASH_BAD_OPTION",
      kind: "input",
      field: "chunkSize",
    });
    await expect(hashFile(path, { concurrency: 0 })).rejects.toMatchObject({ field: "concurrency" });
  });

  it("fails when the file grows while it is hashed", async () => {
    const dir = await testdir();
    const path = join(dir, "growing.bin");
    await writeFile(path, randomBytes(8 * CHUNK));
    let appended = false;
    const onProgress = (event: HashProgressEvent) => {
      if (event.type !== "bytes" || appended) return;
      appended = true;
      appendFileSync(path, "more");
    };
    const result = hashFile(path, { chunkSize: CHUNK, progressIntervalMs: 0, onProgress });
    await expect(result).rejects.toMatchObject({ code: "HASH_FILE_CHANGED", file: path });
  });

  it("stops on abort, before and during hashing", async () => {
    const dir = await testdir();
    const path = join(dir, "big.bin");
    await writeFile(path, randomBytes(32 * CHUNK));
    await expect(hashFile(path, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: "HASH_ABORTED",
    });
    const controller = new AbortController();
    const seen: string[] = [];
    const result = hashFile(path, {
      chunkSize: CHUNK,
      progressIntervalMs: 0,
      signal: controller.signal,
      onProgress: (event) => {
        seen.push(event.type);
        if (event.type === "bytes") controller.abort();
      },
    });
    await expect(result).rejects.toMatchObject({ code: "HASH_ABORTED", kind: "failed" });
    expect(seen).toEqual(["file-start", "bytes"]);
  });

  it("passes on an error thrown by the progress callback", async () => {
    const dir = await testdir();
    const path = join(dir, "f.bin");
    await writeFile(path, randomBytes(4 * CHUNK));
    const boom = new Error("progress sink broke");
    const result = hashFile(path, {
      chunkSize: CHUNK,
      onProgress: () => {
        throw boom;
      },
    });
    await expect(result).rejects.toBe(boom);
  });
});

describe("hashFiles", () => {
  async function someFiles(count: number, size: (i: number) => number) {
    const dir = await testdir();
    const files = new Map<string, Buffer>();
    for (let i = 0; i < count; i++) {
      const bytes = randomBytes(size(i));
      const path = join(dir, `f${i}.bin`);
      await writeFile(path, bytes);
      files.set(path, bytes);
    }
    return files;
  }

  it("hashes on worker threads", async () => {
    const files = await someFiles(6, (i) => i * 37 * 1024 + (i === 3 ? 0 : 5));
    const digests = await hashFilesTuned(
      [...files.keys()],
      { concurrency: 3, chunkSize: CHUNK },
      EAGER_WORKERS,
    );
    expect([...digests.keys()]).toEqual([...files.keys()]);
    for (const [path, bytes] of files)
      expect(digests.get(path)).toEqual({ size: bytes.length, sha256: sha(bytes) });
  });

  it("reports progress that adds up, from every thread", async () => {
    const files = await someFiles(5, (i) => (i + 1) * 3 * CHUNK + i);
    const total = [...files.values()].reduce((sum, bytes) => sum + bytes.length, 0);
    for (const progressIntervalMs of [0, 60_000]) {
      const events: HashProgressEvent[] = [];
      await hashFilesTuned(
        [...files.keys()],
        { concurrency: 2, chunkSize: CHUNK, progressIntervalMs, onProgress: (e) => events.push(e) },
        EAGER_WORKERS,
      );
      const bytes = events.filter((e) => e.type === "bytes").reduce((sum, e) => sum + e.bytes, 0);
      expect(bytes).toBe(total);
      expect(events.every((e) => e.totalBytes === total)).toBe(true);
      expect(events.at(-1)).toMatchObject({ type: "file-done", doneBytes: total });
      for (const [path, content] of files) {
        const own = events.filter((e) => e.path === path);
        expect(own[0]).toMatchObject({ type: "file-start", bytes: 0, fileSize: content.length });
        expect(own.at(-1)).toMatchObject({ type: "file-done", bytes: content.length });
        expect(own.filter((e) => e.type === "bytes").reduce((s, e) => s + e.bytes, 0)).toBe(content.length);
      }
    }
  });

  it("aborts while worker threads are hashing", async () => {
    const files = await someFiles(4, () => 64 * CHUNK);
    const controller = new AbortController();
    const result = hashFilesTuned(
      [...files.keys()],
      {
        concurrency: 2,
        chunkSize: CHUNK,
        progressIntervalMs: 0,
        signal: controller.signal,
        onProgress: (e) => {
          if (e.type === "bytes") controller.abort();
        },
      },
      EAGER_WORKERS,
    );
    await expect(result).rejects.toMatchObject({ code: "HASH_ABORTED" });
  });

  it("fails naming a file that changed between listing and hashing", async () => {
    const files = await someFiles(3, (i) => (3 - i) * 4 * CHUNK);
    const paths = [...files.keys()];
    const smallest = paths[2]!;
    const result = hashFilesTuned(
      paths,
      {
        concurrency: 2,
        chunkSize: CHUNK,
        // The largest file starts first; the smallest is still waiting in the queue.
        onProgress: (e) => {
          if (e.type === "file-start" && e.path === paths[0]) truncateSync(smallest, 1);
        },
      },
      EAGER_WORKERS,
    );
    await expect(result).rejects.toMatchObject({ code: "HASH_FILE_CHANGED", kind: "failed", file: smallest });
  });
});

describe("hashDirectory", () => {
  it("inventories a tree with sorted relative POSIX paths", async () => {
    const dir = await testdir();
    const content: Record<string, Buffer> = {
      "a.txt": randomBytes(10),
      "a/b.bin": randomBytes(CHUNK + 3),
      "a/c/d.bin": randomBytes(0),
      "model.safetensors": randomBytes(3 * CHUNK),
      "Z.json": randomBytes(5),
    };
    for (const [relative, bytes] of Object.entries(content)) {
      await mkdir(join(dir, relative, ".."), { recursive: true });
      await writeFile(join(dir, relative), bytes);
    }
    await mkdir(join(dir, "empty"));
    const inventory = await hashDirectory(dir, { chunkSize: CHUNK });
    expect(inventory.files.map((f) => f.path)).toEqual([
      "Z.json",
      "a.txt",
      "a/b.bin",
      "a/c/d.bin",
      "model.safetensors",
    ]);
    for (const file of inventory.files) {
      const bytes = content[file.path]!;
      expect(file).toEqual({ path: file.path, size: bytes.length, sha256: sha(bytes) });
    }
    expect(inventory.size).toBe(Object.values(content).reduce((sum, b) => sum + b.length, 0));
  });

  it("names files by relative path in progress events", async () => {
    const dir = await testdir();
    await mkdir(join(dir, "shards"));
    await writeFile(join(dir, "shards", "0.bin"), randomBytes(2 * CHUNK));
    await writeFile(join(dir, "meta.json"), "{}");
    const events: HashProgressEvent[] = [];
    const inventory = await hashDirectory(dir, { chunkSize: CHUNK, onProgress: (e) => events.push(e) });
    expect(new Set(events.map((e) => e.path))).toEqual(new Set(["meta.json", "shards/0.bin"]));
    expect(events.filter((e) => e.type === "bytes").reduce((sum, e) => sum + e.bytes, 0)).toBe(
      inventory.size,
    );
  });

  it("refuses a symbolic link anywhere inside, to a file or a directory", async () => {
    const outside = await testdir();
    await writeFile(join(outside, "secret"), "x");
    for (const target of [join(outside, "secret"), outside]) {
      const dir = await testdir();
      await mkdir(join(dir, "sub"));
      await writeFile(join(dir, "sub", "ok.bin"), "ok");
      await symlink(target, join(dir, "sub", "escape"));
      await expect(hashDirectory(dir)).rejects.toMatchObject({
        code: "HASH_SYMLINK_REFUSED",
        kind: "refused",
        file: join(dir, "sub", "escape"),
      });
    }
  });

  it("refuses a FIFO", async () => {
    const dir = await testdir();
    execFileSync("mkfifo", [join(dir, "pipe")]);
    await expect(hashDirectory(dir)).rejects.toMatchObject({
      code: "HASH_SPECIAL_FILE_REFUSED",
      file: join(dir, "pipe"),
    });
  });

  it("refuses a file swapped for a symbolic link after the walk (O_NOFOLLOW)", async () => {
    const dir = await testdir();
    await writeFile(join(dir, "real"), "x");
    await symlink(join(dir, "real"), join(dir, "link"));
    const io = {
      open,
      createHash,
      flags: { read: constants.O_RDONLY, noFollow: constants.O_NOFOLLOW, nonBlock: constants.O_NONBLOCK },
    };
    const buffers = [Buffer.alloc(CHUNK), Buffer.alloc(CHUNK)] as const;
    const job = { id: 0, path: join(dir, "link"), expectedSize: 1, noFollow: true };
    const refused = await hashPath(
      io,
      job,
      buffers,
      () => {},
      () => false,
    );
    expect(refused).toMatchObject({ ok: false, code: "HASH_SYMLINK_REFUSED" });
    const followed = await hashPath(
      io,
      { ...job, noFollow: false },
      buffers,
      () => {},
      () => false,
    );
    expect(followed).toEqual({ ok: true, size: 1, sha256: sha(Buffer.from("x")) });
    const syncIo = { ...io, ...fs, createHash };
    expect(hashPathSync(syncIo, job, buffers[0], () => {})).toMatchObject({ code: "HASH_SYMLINK_REFUSED" });
    expect(hashPathSync(syncIo, { ...job, noFollow: false }, buffers[0], () => {})).toEqual(followed);
  });

  it("rejects a missing directory naming it", async () => {
    const dir = join(await testdir(), "nope");
    await expect(hashDirectory(dir)).rejects.toMatchObject({ code: "HASH_READ_FAILED", file: dir });
  });
});

describe("hashFiles defaults", () => {
  it("keys results by the paths as given and drops duplicates", async () => {
    const dir = await testdir();
    const path = join(dir, "x.bin");
    await writeFile(path, "abc");
    const digests = await hashFiles([path, path]);
    expect([...digests]).toEqual([[path, { size: 3, sha256: sha256Hex("abc") }]]);
  });
});
