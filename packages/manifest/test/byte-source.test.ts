import { open, rename, writeFile } from "node:fs/promises";
import { testdir } from "@ckpt/test-utils";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fileHandleByteSource, openFileByteSource } from "../src/index.js";

describe("file byte sources", () => {
  it("reads from the handle it was given even after the path is replaced", async () => {
    const dir = await testdir("ckpt-byte-source-");
    const path = join(dir, "model.pt");
    await writeFile(path, "original bytes");
    const handle = await open(path, "r");
    const source = fileHandleByteSource(handle, path, (await handle.stat()).size);
    await writeFile(join(dir, "other"), "replacement!!!");
    await rename(join(dir, "other"), path);
    expect(Buffer.from(await source.read(0, source.size)).toString()).toBe("original bytes");
    const fresh = await openFileByteSource(path);
    expect(Buffer.from(await fresh.read(0, fresh.size)).toString()).toBe("replacement!!!");
    await fresh.close();
    await expect(source.read(10, 5)).rejects.toThrow(RangeError);
    await source.close();
    await expect(handle.stat()).rejects.toMatchObject({ code: "EBADF" });
  });
});
