// Issue 16: `ckpt artifact fetch` and `ckpt artifact publish` onto a full disk (a real small
// tmpfs; the suite runs as root, in CI too) print the coded error, exit 1, and succeed once space
// is freed.
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { openStore } from "@ckpt/object-store";
import { fillDisk, smallDisk, testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { publishFixture } from "./helpers/archive-fixture.js";
import { captureIo } from "./helpers/capture.js";

const KiB = 1024;

describe("ckpt artifact fetch and publish on a full disk", () => {
  it("fetch into a full --dst exits 1 with READER_NO_SPACE naming the staging directory, then fetches", async () => {
    const archive = join(await testdir("ckpt-cli-full-src-"), "checkpoint_artifacts", "iter_000000300");
    const uri = `file://${archive}`;
    const { model } = await publishFixture(await openStore(uri), new Uint8Array(64 * KiB).fill(5));
    const disk = await smallDisk(256 * KiB);
    const dst = join(disk, "stage");
    const filler = await fillDisk(disk, 16 * KiB);
    const c = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dst], c.io)).toBe(1);
    expect(c.err()).toContain("ckpt: error code READER_NO_SPACE");
    expect(c.err()).toMatch(/stage\/iter_000000300 needs \d+ bytes, \d+ free/);
    expect(c.out()).toBe("");
    await expect(readdir(dst)).rejects.toMatchObject({ code: "ENOENT" });
    await rm(filler);
    const again = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dst], again.io)).toBe(0);
    expect(new Uint8Array(await readFile(join(dst, "iter_000000300", "model.pt")))).toEqual(model);
  });

  it("publish to a file:// bucket on a full disk exits 1 with PUBLISH_NO_SPACE, then publishes", async () => {
    const root = await testdir("ckpt-cli-full-pub-");
    const dir = join(root, "run", "checkpoint_artifacts", "iter_000000300");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "model.pt"), new Uint8Array(64 * KiB).fill(6));
    expect(
      await runCli(["artifact", "commit", dir, "--components", "model", "--quiet"], captureIo().io),
    ).toBe(0);
    const disk = await smallDisk(256 * KiB);
    const args = [
      "artifact",
      "publish",
      "--artifact-dir",
      dir,
      "--upload-prefix",
      "vlm/grpo/run-a/20260901120000/checkpoints",
      "--bucket",
      `file://${disk}/archive`,
      "--json",
    ];
    const filler = await fillDisk(disk, 16 * KiB);
    const c = captureIo({ env: { HOME: root } });
    expect(await runCli(args, c.io)).toBe(1);
    const { error } = JSON.parse(c.out());
    expect(error.code).toBe("PUBLISH_NO_SPACE");
    expect(error.message).toMatch(/iter_000000300 needs \d+ bytes, \d+ free\. Nothing was written/);
    await expect(readFile(join(dir, ".uploaded"))).rejects.toMatchObject({ code: "ENOENT" });
    await rm(filler);
    const again = captureIo({ env: { HOME: root } });
    expect(await runCli(args, again.io)).toBe(0);
    expect(JSON.parse(again.out())).toMatchObject({ ok: true, status: "published" });
  });
});
