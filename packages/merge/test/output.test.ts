import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDirectory, type SwapIo } from "@ckpt/manifest";
import { makeTempDir } from "@ckpt/test-utils";
import { describe, expect, it, onTestFinished } from "vitest";
import { sidePaths, swapIntoPlace } from "../src/internal/output.js";

describe("merge's swap into place", () => {
  it("fsyncs the parent after each of its two renames, so a power loss cannot reorder them", async () => {
    const tmp = await makeTempDir("ckpt-merge-swap-");
    onTestFinished(tmp.cleanup);
    const iterDir = join(tmp.dir, "iter_000000001");
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
      `fsync ${tmp.dir}`,
      `rename ${staging} -> ${iterDir}`,
      `fsync ${tmp.dir}`,
    ]);
    expect(await readFile(join(iterDir, "model.pt"), "utf8")).toBe("new");
  });
});
