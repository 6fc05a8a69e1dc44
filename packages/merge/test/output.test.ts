import { execFileSync } from "node:child_process";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDirectory, MERGE_COMPLETE, pathKind, type SwapIo } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { recoverInterruptedSwap, sidePaths, swapIntoPlace } from "../src/internal/output.js";

describe("merge's swap into place", () => {
  it("fsyncs the parent after each of its two renames, so a power loss cannot reorder them", async () => {
    const parent = await testdir("ckpt-merge-swap-");
    const iterDir = join(parent, "iter_000000001");
    const { staging, previous } = sidePaths(iterDir);
    for (const [dir, text] of [
      [iterDir, "old"],
      [staging, "new"],
    ] as const) {
      await mkdir(dir);
      await writeFile(join(dir, "model.pt"), text);
    }
    const calls: string[] = [];
    const io: SwapIo = {
      async rename(from, to) {
        await rename(from, to);
        calls.push(`rename ${from} -> ${to}`);
      },
      async fsyncDirectory(dir) {
        await fsyncDirectory(dir);
        calls.push(`fsync ${dir}`);
      },
    };
    await swapIntoPlace(iterDir, io);
    expect(calls).toEqual([
      `fsync ${staging}`,
      `rename ${iterDir} -> ${previous}`,
      `fsync ${parent}`,
      `rename ${staging} -> ${iterDir}`,
      `fsync ${parent}`,
    ]);
    expect(await readFile(join(iterDir, "model.pt"), "utf8")).toBe("new");
  });
});

describe("merge's recovery of its side directories: the ownership rule", () => {
  async function foreignBesideRecord(dir: string, contents: string | undefined): Promise<void> {
    await mkdir(dir);
    await writeFile(join(dir, "notes.txt"), "mine");
    const record = join(dir, MERGE_COMPLETE.fileName);
    if (contents === undefined) execFileSync("mkfifo", [record]);
    else await writeFile(record, contents);
  }

  describe.each([
    ["a garbage", "not json{"],
    ["an empty-JSON", "{}"],
    ["a FIFO", undefined],
  ])("beside %s completion record", (_, contents) => {
    it.each(["staging", "previous"] as const)(
      "a look-alike .merge-%s holding foreign files is refused untouched",
      async (side) => {
        const iterDir = join(await testdir("ckpt-merge-side-"), "iter_000000001");
        await mkdir(iterDir);
        await foreignBesideRecord(sidePaths(iterDir)[side], contents);
        await expect(recoverInterruptedSwap(iterDir)).rejects.toMatchObject({ code: "MERGE_FOREIGN_FILES" });
        expect(await readFile(join(sidePaths(iterDir)[side], "notes.txt"), "utf8")).toBe("mine");
      },
    );

    it("a look-alike .merge-previous where the artifact is missing is not renamed into its place", async () => {
      const iterDir = join(await testdir("ckpt-merge-side-"), "iter_000000001");
      const { previous } = sidePaths(iterDir);
      await foreignBesideRecord(previous, contents);
      await expect(recoverInterruptedSwap(iterDir)).rejects.toMatchObject({ code: "MERGE_FOREIGN_FILES" });
      expect(await pathKind(iterDir)).toBe("absent");
      expect(await readFile(join(previous, "notes.txt"), "utf8")).toBe("mine");
    });
  });
});
