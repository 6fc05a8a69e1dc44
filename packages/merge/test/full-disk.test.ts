// Issue 16: merge on a full disk. The output lives on a real tmpfs mounted for the test (the suite
// runs as root); the experts live elsewhere. A failed mount fails the suite rather than skipping it.
import { createHash } from "node:crypto";
import { readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { fillDisk, smallDisk, testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { type MergeError, mergeExperts } from "../src/index.js";
import { randomModel, writeTorchExpert } from "./helpers.js";

const MiB = 1024 * 1024;
const PAGE = 4096;
const shapes = { w: [256, 256], v: [128, 256] };
/** BF16 bytes of the tensors above: what the merged model.pt must hold at least. */
const PAYLOAD = (256 * 256 + 128 * 256) * 2;

/** Every file and directory under `dir` but the filler, with each file's SHA-256. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).map(String).sort()) {
    if (name === ".filler") continue;
    const path = join(dir, name);
    out[name] = (await stat(path)).isDirectory()
      ? "dir"
      : createHash("sha256")
          .update(await readFile(path))
          .digest("hex");
  }
  return out;
}

let disk = "";
let experts: string[] = [];
let out = "";
beforeEach(async () => {
  const tmp = await testdir("ckpt-merge-disk-");
  experts = [
    await writeTorchExpert(join(tmp, "a.pt"), randomModel(1, shapes)),
    await writeTorchExpert(join(tmp, "b.pt"), randomModel(2, shapes)),
    await writeTorchExpert(join(tmp, "c.pt"), randomModel(3, shapes)),
  ];
  disk = await smallDisk(2 * MiB);
  out = join(disk, "run/checkpoint_artifacts/iter_000000300/model.pt");
  // The previous output every failure below must leave as it was.
  await mergeExperts({ mode: "avg", experts: experts.slice(0, 2), out });
});

describe("merge on a full disk", () => {
  it("refuses before touching anything when the tensors will not fit, and merges once space is freed", async () => {
    const before = await snapshot(disk);
    const filler = await fillDisk(disk, PAYLOAD / 2);
    const refusal = mergeExperts({ mode: "avg", experts, out, force: true });
    await expect(refusal).rejects.toMatchObject({ code: "MERGE_NO_SPACE", kind: "failed" });
    await expect(refusal).rejects.toThrow(`needs ${PAYLOAD} bytes`);
    await expect(refusal).rejects.toThrow(".iter_000000300.merge-staging");
    await expect(refusal).rejects.toThrow("nothing under the final name changed; free space and run again");
    expect(await snapshot(disk)).toEqual(before);
    await rm(filler);
    const report = await mergeExperts({ mode: "avg", experts, out, force: true });
    expect(report).toMatchObject({ status: "merged", experts: [{}, {}, {}] });
  });

  it("fails every write step with MERGE_NO_SPACE, leaving the previous output and no temporaries, until the disk holds it", async () => {
    const before = await snapshot(disk);
    const failedSteps = new Set<string>();
    let merged = false;
    // One page more free space per attempt: each step of the build in turn is the one that meets ENOSPC.
    for (let leave = PAYLOAD; !merged && leave < PAYLOAD + 64 * PAGE; leave += PAGE) {
      const filler = await fillDisk(disk, leave);
      try {
        await mergeExperts({ mode: "avg", experts, out, force: true });
        merged = true;
      } catch (error) {
        expect(error).toMatchObject({ code: "MERGE_NO_SPACE" });
        const file = (error as MergeError).file!;
        expect((error as Error).message).toContain(file);
        expect((error as Error).message).toContain("free space and run again");
        failedSteps.add(file.slice(file.lastIndexOf("/") + 1));
        expect(await snapshot(disk)).toEqual(before);
      } finally {
        await rm(filler);
      }
    }
    expect(merged).toBe(true);
    expect([...failedSteps].sort()).toEqual(
      expect.arrayContaining([
        ".merge-complete.json",
        ".posttrain-checkpoint-artifact.json",
        "merge-diagnostics.json",
        "model.pt",
      ]),
    );
    expect(await snapshot(disk)).not.toEqual(before);
  });
});
