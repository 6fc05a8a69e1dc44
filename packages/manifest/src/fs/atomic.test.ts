import { createHash } from "node:crypto";
import { readdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  commitLast,
  findTemporaries,
  fsyncDirectory,
  fsyncFile,
  removeTemporaries,
  temporaryPathFor,
  writeFileAtomic,
} from "./atomic.js";

const sha = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");

describe("writeFileAtomic", () => {
  it("writes bytes and strings, replaces old content and leaves no temporary", async () => {
    const dir = await testdir();
    const target = join(dir, "latest_checkpoint.txt");
    await writeFileAtomic(target, "iter_000000100\n");
    expect(await readFile(target, "utf8")).toBe("iter_000000100\n");
    const bytes = new Uint8Array([0, 1, 2, 255]);
    const result = await writeFileAtomic(target, bytes);
    expect(new Uint8Array(await readFile(target))).toEqual(bytes);
    expect(result).toEqual({ path: target, size: 4, sha256: sha(bytes) });
    expect(await readdir(dir)).toEqual(["latest_checkpoint.txt"]);
  });

  it("writes chunks from an async source", async () => {
    const dir = await testdir();
    const target = join(dir, "big.bin");
    async function* source() {
      for (let i = 0; i < 5; i++) yield new Uint8Array(1000).fill(i);
    }
    const result = await writeFileAtomic(target, source(), { verify: true });
    const content = await readFile(target);
    expect(content.length).toBe(5000);
    expect(content[4999]).toBe(4);
    expect(result.sha256).toBe(sha(content));
  });

  it("applies the requested mode exactly", async () => {
    const dir = await testdir();
    const target = join(dir, "secret.json");
    await writeFileAtomic(target, "{}", { mode: 0o600 });
    expect((await stat(target)).mode & 0o777).toBe(0o600);
  });

  it("leaves the old content and no temporary when the source throws mid-write", async () => {
    const dir = await testdir();
    const target = join(dir, "manifest.json");
    await writeFile(target, "old");
    function* failing() {
      yield new Uint8Array(4096).fill(7);
      throw new Error("disk source broke");
    }
    await expect(writeFileAtomic(target, failing())).rejects.toMatchObject({
      name: "ManifestError",
      code: "FS_WRITE_FAILED",
      kind: "failed",
      file: target,
    });
    expect(await readFile(target, "utf8")).toBe("old");
    expect(await readdir(dir)).toEqual(["manifest.json"]);
  });

  it("fails with FS_WRITE_FAILED naming the file when the directory is missing", async () => {
    const dir = await testdir();
    const target = join(dir, "missing", "x.json");
    const error = await writeFileAtomic(target, "x").catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "FS_WRITE_FAILED", file: target });
    expect((error as Error).message).toContain(target);
  });

  it("verify catches storage returning other bytes and keeps the old content", async () => {
    const dir = await testdir();
    const target = join(dir, "manifest.json");
    await writeFile(target, "old");
    const corrupt = (tempPath: string) => writeFile(tempPath, "NEW CONTENT, bit-flipped");
    await expect(
      writeFileAtomic(target, "new content, as sent", { verify: true, beforeCommit: corrupt }),
    ).rejects.toMatchObject({ code: "FS_VERIFY_MISMATCH", kind: "failed", file: target });
    expect(await readFile(target, "utf8")).toBe("old");
    expect(await readdir(dir)).toEqual(["manifest.json"]);
  });

  it("without verify the same fault goes through (so the verify test can fail)", async () => {
    const dir = await testdir();
    const target = join(dir, "manifest.json");
    const corrupt = (tempPath: string) => writeFile(tempPath, "other");
    await writeFileAtomic(target, "sent", { beforeCommit: corrupt });
    expect(await readFile(target, "utf8")).toBe("other");
  });
});

describe("fsync helpers", () => {
  it("fsync a file and a directory, and name the path when it is missing", async () => {
    const dir = await testdir();
    const file = join(dir, "a.bin");
    await writeFile(file, "a");
    await fsyncFile(file);
    await fsyncDirectory(dir);
    await expect(fsyncFile(join(dir, "nope"))).rejects.toMatchObject({
      code: "FS_FSYNC_FAILED",
      file: join(dir, "nope"),
    });
    await expect(fsyncDirectory(join(dir, "nodir"))).rejects.toMatchObject({ code: "FS_FSYNC_FAILED" });
  });
});

describe("commitLast", () => {
  it("writes payloads and already-written files, then the commit record", async () => {
    const dir = await testdir();
    const own = join(dir, "model.safetensors");
    await writeFile(own, "weights");
    const result = await commitLast(
      [
        { path: own, written: true },
        { path: join(dir, "optim.bin"), data: "optimizer" },
      ],
      { path: join(dir, "_COMMITTED"), data: "{}" },
      { verify: true },
    );
    expect(result.path).toBe(join(dir, "_COMMITTED"));
    expect((await readdir(dir)).sort()).toEqual(["_COMMITTED", "model.safetensors", "optim.bin"]);
    expect(await readFile(join(dir, "optim.bin"), "utf8")).toBe("optimizer");
  });

  it("does not write the commit record when a payload fails", async () => {
    const dir = await testdir();
    const commit = join(dir, "_COMMITTED");
    await expect(
      commitLast([{ path: join(dir, "gone.bin"), written: true }], { path: commit, data: "{}" }),
    ).rejects.toMatchObject({ code: "FS_FSYNC_FAILED" });
    expect(await readdir(dir)).toEqual([]);
  });
});

describe("leftover temporaries", () => {
  it("finds only this tool's temporaries and removes the abandoned ones", async () => {
    const dir = await testdir();
    const mine = temporaryPathFor(join(dir, "live.json"));
    const dead = join(dir, ".manifest.json.tmp-999999999-0123456789ab");
    await writeFile(mine, "in progress");
    await writeFile(dead, "crashed");
    await writeFile(join(dir, ".manifest.json.tmp-1-short"), "not ours");
    await writeFile(join(dir, "manifest.json"), "committed");
    await symlink(join(dir, "manifest.json"), join(dir, ".link.tmp-999999998-0123456789ab"));

    const found = await findTemporaries(dir);
    expect(found.map((t) => t.target)).toEqual(["link", "live.json", "manifest.json"]);
    expect(found.find((t) => t.target === "manifest.json")).toMatchObject({ path: dead, pid: 999999999 });

    const removed = await removeTemporaries(dir);
    expect(removed.map((t) => t.path)).toEqual([dead]);
    expect((await readdir(dir)).sort()).toEqual(
      [
        ".link.tmp-999999998-0123456789ab",
        ".manifest.json.tmp-1-short",
        mine.slice(dir.length + 1),
        "manifest.json",
      ].sort(),
    );

    await removeTemporaries(dir, { isAbandoned: () => true });
    expect(await readFile(join(dir, "manifest.json"), "utf8")).toBe("committed");
    expect(await findTemporaries(dir)).toHaveLength(1);
  });
});
