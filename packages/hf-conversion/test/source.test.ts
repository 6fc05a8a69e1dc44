// @module-tag torch
import { testdir } from "@ckpt/test-utils";
import { execFileSync } from "node:child_process";
import { appendFile, copyFile, rename, symlink } from "node:fs/promises";
import { join } from "node:path";
import { hashFile } from "@ckpt/manifest";
import { beforeAll, describe, expect, it } from "vitest";
import { openSource } from "../src/source/open.js";
import { type Fixture, makeFixture, PYTHON_TIMEOUT } from "./helpers.js";

let root: string;
let fixture: Fixture;

beforeAll(async () => {
  root = await testdir("ckpt-hf-source-");
  fixture = await makeFixture(join(root, "fx"), "dense", 2, 91);
}, PYTHON_TIMEOUT);

async function sizeOf(path: string): Promise<number> {
  return (await hashFile(path)).size;
}

describe("the source is one open file", () => {
  it("a model.pt replaced by rename while open is still hashed and read from the file opened", async () => {
    const path = join(root, "model.pt");
    await copyFile(fixture.expert(0), path);
    const expected = await hashFile(path);
    const source = await openSource(path, path, { size: expected.size, recordedBy: "the test" });
    try {
      await copyFile(fixture.expert(1), join(root, "other.pt"));
      await rename(join(root, "other.pt"), path);
      expect(await source.sha256()).toBe(expected.sha256);
      expect((await hashFile(path)).sha256).not.toBe(expected.sha256);
      await expect(source.assertUnchanged()).resolves.toBeUndefined();
    } finally {
      await source.close();
    }
  });

  it("a model.pt changed in place while open is refused", async () => {
    const path = join(root, "inplace.pt");
    await copyFile(fixture.expert(0), path);
    const source = await openSource(path, path, { size: await sizeOf(path), recordedBy: "the test" });
    try {
      await appendFile(path, "x");
      await expect(source.assertUnchanged()).rejects.toMatchObject({ code: "MATERIALIZE_SOURCE_CHANGED" });
    } finally {
      await source.close();
    }
  });

  it.each([
    ["a FIFO", (path: string) => execFileSync("mkfifo", [path])],
    ["a link to /dev/zero", (path: string) => symlink("/dev/zero", path)],
  ])(
    "a model.pt that is %s is refused by code, naming it, without waiting or reading",
    async (what, make) => {
      const path = join(root, `special-${what.length}.pt`);
      await make(path);
      const error = await openSource(path, path, { size: 1024, recordedBy: "the test" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ code: "MATERIALIZE_SOURCE_UNREADABLE", kind: "input" });
      expect((error as Error).message).toContain(path);
      expect((error as Error).message).toMatch(/not a regular file/);
    },
    10_000,
  );

  it("lists the state dict's tensors without the net. prefix", async () => {
    const path = fixture.expert(0);
    const source = await openSource(path, path, { size: await sizeOf(path), recordedBy: "the test" });
    try {
      expect(source.tensors.map((t) => t.name)).toContain("model.embed_tokens.weight");
      expect(source.tensors.every((t) => !t.name.startsWith("net."))).toBe(true);
    } finally {
      await source.close();
    }
  });
});
