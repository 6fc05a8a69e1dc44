import { randomBytes } from "node:crypto";
import { open, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { compareFileRanges } from "./compare-ranges.js";

describe("compareFileRanges", () => {
  it("finds equal ranges at different offsets equal, across many read buffers", async () => {
    const dir = await testdir();
    const payload = randomBytes(700 * 1024 + 3);
    await writeFile(join(dir, "a"), Buffer.concat([randomBytes(100), payload]));
    await writeFile(join(dir, "b"), Buffer.concat([randomBytes(5000), payload, randomBytes(9)]));
    const result = await compareFileRanges(join(dir, "a"), join(dir, "b"), [
      { a: 100, b: 5000, length: payload.length },
      { a: 100 + 17, b: 5000 + 17, length: 1000 },
      { a: 0, b: 0, length: 0 },
    ]);
    expect(result).toEqual({ differing: [], bytes: payload.length + 1000 });
  });

  it("names each pair that differs, by one byte deep inside or by running past the end", async () => {
    const dir = await testdir();
    const bytes = randomBytes(600 * 1024);
    const changed = Buffer.from(bytes);
    changed[500 * 1024 + 7]! ^= 0x01;
    await writeFile(join(dir, "a"), bytes);
    await writeFile(join(dir, "b"), changed);
    const result = await compareFileRanges(join(dir, "a"), join(dir, "b"), [
      { a: 0, b: 0, length: 400 * 1024 },
      { a: 0, b: 0, length: bytes.length },
      { a: bytes.length - 10, b: bytes.length - 10, length: 20 },
      { a: 400 * 1024, b: 400 * 1024, length: 100 * 1024 },
    ]);
    expect(result.differing).toEqual([
      { index: 1, at: 500 * 1024 + 7 },
      { index: 2, at: 10 },
    ]);
    // Equal bytes counted: all of pairs 0 and 3, and pair 1 up to the 128 KiB read holding the change.
    expect(result.bytes).toBe((400 + 384 + 100) * 1024);
  });

  it("reads a file this process holds open through /proc/self/fd", async () => {
    const dir = await testdir();
    const bytes = randomBytes(4096);
    await writeFile(join(dir, "a"), bytes);
    await writeFile(join(dir, "b"), bytes);
    const handle = await open(join(dir, "a"), "r");
    try {
      const result = await compareFileRanges(`/proc/self/fd/${handle.fd}`, join(dir, "b"), [
        { a: 0, b: 0, length: bytes.length },
      ]);
      expect(result.differing).toEqual([]);
    } finally {
      await handle.close();
    }
  });

  it("rejects with FILE_COMPARE_FAILED naming the files when one cannot be opened", async () => {
    const dir = await testdir();
    await writeFile(join(dir, "a"), "x");
    const missing = join(dir, "missing");
    await expect(
      compareFileRanges(join(dir, "a"), missing, [{ a: 0, b: 0, length: 1 }]),
    ).rejects.toMatchObject({
      code: "FILE_COMPARE_FAILED",
      file: missing,
      message: expect.stringContaining(missing),
    });
  });
});
