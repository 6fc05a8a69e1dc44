// @module-tag torch
// A merged artifact is an ordinary artifact: the publisher archives its model, native manifest,
// completion record and in-artifact diagnostics; after publishing, the identical merge request
// still skips (the receipt beside it is not the merge's, and a skip writes nothing), while a
// forced replacement refuses to remove that receipt.
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { publishArtifact } from "@ckpt/archive-publisher";
import { mergeExperts } from "@ckpt/merge";
import { openStore } from "@ckpt/object-store";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { snapshotTree } from "../helpers/artifact.js";
import { makeDenseFixture } from "./fixtures.js";

describe("a merged artifact through the publisher", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let inputs: { experts: string[]; base: string };
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-merge-publish-");
    inputs = await makeDenseFixture(join(tmp.dir, "fixture"), 3, {
      layers: 1,
      hidden: 32,
      intermediate: 64,
      vocab: 64,
    });
  }, 120_000);
  afterAll(async () => {
    await tmp.cleanup();
  });

  it("archives the completion record and diagnostics, then the same merge skips beside the receipt", async () => {
    const iterDir = join(tmp.dir, "run/checkpoint_artifacts/iter_000000300");
    const request = { mode: "tv", lam: 0.5, ...inputs, out: join(iterDir, "model.pt") };
    expect((await mergeExperts(request)).status).toBe("merged");
    const remote = join(tmp.dir, "remote");
    const store = await openStore(
      `file://${remote}/p/g/r/20260901120000/checkpoint_artifacts/iter_000000300`,
    );
    await publishArtifact(iterDir, store);
    const archived = [...(await snapshotTree(remote)).keys()]
      .filter((k) => !k.includes(".ckpt-meta"))
      .map((k) => k.split("/").pop());
    expect(archived.sort()).toEqual([
      ".merge-complete.json",
      ".posttrain-archive.json",
      ".posttrain-checkpoint-artifact.json",
      "merge-diagnostics.json",
      "model.pt",
    ]);
    expect(await readdir(iterDir)).toContain(".uploaded");
    const before = await snapshotTree(iterDir);
    expect((await mergeExperts(request)).status).toBe("skipped");
    expect(await snapshotTree(iterDir)).toEqual(before);
    await expect(mergeExperts({ ...request, lam: 1, force: true })).rejects.toMatchObject({
      code: "MERGE_FOREIGN_FILES",
      message: expect.stringContaining(".uploaded"),
    });
    expect(await snapshotTree(iterDir)).toEqual(before);
  }, 120_000);
});
