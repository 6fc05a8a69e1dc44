import { execFileSync } from "node:child_process";
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { describeRefusal, openRegularFile, readRegularFile } from "../src/index.js";

describe("openRegularFile / readRegularFile", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await testdir("ckpt-regular-file-");
  });

  it("reads a regular file within its cap", async () => {
    const path = join(dir, "a");
    await writeFile(path, "hello");
    const read = await readRegularFile(path, { maxBytes: 5 });
    expect(read.ok && Buffer.from(read.bytes).toString()).toBe("hello");
  });

  it("refuses a file over the cap before reading it", async () => {
    const path = join(dir, "big");
    await writeFile(path, "123456");
    const read = await readRegularFile(path, { maxBytes: 5 });
    expect(read).toMatchObject({ ok: false, reason: "too-large", size: 6, maxBytes: 5 });
  });

  it("refuses a FIFO without blocking on it", { timeout: 2000 }, async () => {
    const path = join(dir, "fifo");
    execFileSync("mkfifo", [path]);
    const read = await readRegularFile(path, { maxBytes: 1024 });
    expect(read).toMatchObject({ ok: false, reason: "not-a-file", what: "a FIFO" });
    if (!read.ok) expect(describeRefusal(read)).toContain(path);
  });

  it("refuses /dev/zero instead of reading it unbounded", { timeout: 2000 }, async () => {
    const read = await readRegularFile("/dev/zero", { maxBytes: 1024 });
    expect(read).toMatchObject({ ok: false, reason: "not-a-file", what: "a device" });
  });

  it("refuses a directory, reports a missing file, and with noFollow a symbolic link", async () => {
    await mkdir(join(dir, "d"));
    expect(await openRegularFile(join(dir, "d"), { maxBytes: 1 })).toMatchObject({ reason: "not-a-file" });
    expect(await openRegularFile(join(dir, "none"), { maxBytes: 1 })).toMatchObject({ reason: "missing" });
    await writeFile(join(dir, "target"), "x");
    await symlink(join(dir, "target"), join(dir, "link"));
    expect(await openRegularFile(join(dir, "link"), { maxBytes: 1, noFollow: true })).toMatchObject({
      reason: "not-a-file",
      what: "a symbolic link",
    });
    const followed = await openRegularFile(join(dir, "link"), { maxBytes: 1 });
    expect(followed.ok).toBe(true);
    if (followed.ok) await followed.handle.close();
  });
});
