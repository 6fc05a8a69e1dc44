import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile, readlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it, onTestFinished } from "vitest";
import { ShardWriter } from "../src/convert/shard-writer.js";

async function setup(): Promise<{ dir: string; source: Buffer; writer: ShardWriter }> {
  const dir = await testdir("ckpt-shard-writer-");
  const source = randomBytes(3 * 1024 * 1024 + 11);
  await writeFile(join(dir, "source.bin"), source);
  const writer = new ShardWriter(join(dir, "source.bin"));
  // Registered after testdir's removal, so it runs first (onTestFinished runs as a stack).
  onTestFinished(() => writer.shutdown());
  return { dir, source, writer };
}

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
/** Whether this process has `path` open (through any thread). */
async function isOpen(path: string): Promise<boolean> {
  for (const fd of await readdir("/proc/self/fd")) {
    const target = await readlink(join("/proc/self/fd", fd)).catch(() => "");
    if (target === path) return true;
  }
  return false;
}

describe("ShardWriter", () => {
  it("writes ranges of the source and caller bytes in order, with the digest of what it wrote", async () => {
    const { dir, source, writer } = await setup();
    const header = Buffer.from("header bytes");
    const shared = new Uint8Array(new SharedArrayBuffer(1000));
    shared.fill(7);
    const a = await writer.open(join(dir, "a.bin"));
    const b = await writer.open(join(dir, "b.bin"));
    await a.bytes(header);
    await a.range(5, 2 * 1024 * 1024);
    await b.range(0, source.length);
    await a.bytes(shared);
    await a.range(source.length - 3, 3);
    const expected = Buffer.concat([
      header,
      source.subarray(5, 5 + 2 * 1024 * 1024),
      shared,
      source.subarray(-3),
    ]);
    expect(await a.close()).toEqual({ size: expected.length, sha256: sha(expected) });
    expect(await b.close()).toEqual({ size: source.length, sha256: sha(source) });
    expect((await readFile(join(dir, "a.bin"))).equals(expected)).toBe(true);
    expect((await readFile(join(dir, "b.bin"))).equals(source)).toBe(true);
  });

  it("fails a range past the source's end naming the file, and closes that file", async () => {
    const { dir, source, writer } = await setup();
    const out = await writer.open(join(dir, "short.bin"));
    expect(await isOpen(join(dir, "short.bin"))).toBe(true);
    await expect(out.range(source.length - 10, 20)).rejects.toMatchObject({
      code: "MATERIALIZE_BUILD_FAILED",
      file: join(dir, "short.bin"),
      message: expect.stringContaining("the source ended 10 bytes before a tensor's end"),
    });
    expect(await isOpen(join(dir, "short.bin"))).toBe(false);
    // The writer itself goes on with other files.
    const next = await writer.open(join(dir, "next.bin"));
    await next.range(0, 4);
    expect(await next.close()).toEqual({ size: 4, sha256: sha(source.subarray(0, 4)) });
  });

  it("refuses to open a file that exists, leaving it as it was", async () => {
    const { dir, writer } = await setup();
    await writeFile(join(dir, "taken.bin"), "keep");
    await expect(writer.open(join(dir, "taken.bin"))).rejects.toMatchObject({
      code: "MATERIALIZE_BUILD_FAILED",
      message: expect.stringContaining("EEXIST"),
    });
    expect(await readFile(join(dir, "taken.bin"), "utf8")).toBe("keep");
  });

  it("shutdown closes the files still open and the source", async () => {
    const { dir, writer } = await setup();
    const out = await writer.open(join(dir, "left-open.bin"));
    await out.bytes(Buffer.from("x"));
    expect(await isOpen(join(dir, "left-open.bin"))).toBe(true);
    expect(await isOpen(join(dir, "source.bin"))).toBe(true);
    await writer.shutdown();
    expect(await isOpen(join(dir, "left-open.bin"))).toBe(false);
    expect(await isOpen(join(dir, "source.bin"))).toBe(false);
    await expect(out.bytes(Buffer.from("y"))).rejects.toMatchObject({ code: "MATERIALIZE_BUILD_FAILED" });
  });
});
