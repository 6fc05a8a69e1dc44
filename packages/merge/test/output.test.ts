import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDirectory, type SwapIo } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { sidePaths, swapIntoPlace } from "../src/internal/output.js";

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
