// @module-tag torch
// Issue 16: materialize-hf on a full disk. <out> lives on a real tmpfs mounted for the test (the
// suite runs as root); the base and the checkpoint live elsewhere. A failed mount fails the suite.
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { fillDisk, smallDisk, testdir } from "@ckpt/test-utils";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  type HfConversionError,
  type MaterializeEvent,
  materializeHf,
  materializeHfIter,
} from "../src/index.js";
import { type Fixture, makeArtifact, makeFixture, PYTHON_TIMEOUT, request, snapshot } from "./helpers.js";

const MiB = 1024 * 1024;
const PAGE = 4096;

let dense: Fixture;
let artifactA: string;
let artifactB: string;
beforeAll(async () => {
  const root = await testdir("ckpt-hf-disk-");
  dense = await makeFixture(join(root, "dense"), "dense", 2, 31);
  artifactA = await makeArtifact(join(root, "art-a"), dense.expert(0));
  artifactB = await makeArtifact(join(root, "art-b"), dense.expert(1));
}, PYTHON_TIMEOUT);

let disk = "";
let out = "";
/** Bytes of the export but its marker: what a build of the same base writes before the marker. */
let exportBytes = 0;
beforeEach(async () => {
  disk = await smallDisk(16 * MiB);
  out = join(disk, "exports", "teacher");
  // The existing export every failure below must leave byte-identical.
  await materializeHf(request(artifactA, dense.base, out));
  exportBytes = 0;
  for (const name of await readdir(out, { recursive: true })) {
    const info = await stat(join(out, String(name)));
    if (info.isFile() && String(name) !== ".materialized") exportBytes += info.size;
  }
});

const siblings = async () => (await readdir(join(out, ".."))).sort();

describe("materialize-hf on a full disk", () => {
  it("refuses before touching anything when the planned output will not fit, and builds once space is freed", async () => {
    const before = await snapshot(out);
    const filler = await fillDisk(disk, exportBytes / 2);
    const refusal = materializeHf(request(artifactB, dense.base, out, { force: true }));
    await expect(refusal).rejects.toMatchObject({ code: "MATERIALIZE_NO_SPACE", kind: "failed" });
    await expect(refusal).rejects.toThrow(`${out}.tmp needs ${exportBytes} bytes`);
    await expect(refusal).rejects.toThrow("nothing under the final name changed; free space and run again");
    expect(await snapshot(out)).toEqual(before);
    expect(await siblings()).toEqual(["teacher"]);
    await rm(filler);
    const report = await materializeHf(request(artifactB, dense.base, out, { force: true }));
    expect(report.action).toBe("built");
    expect(await snapshot(out)).not.toEqual(before);
  });

  it("fails the shard writes with MATERIALIZE_NO_SPACE at every free-space level short of the build, leaving the export byte-identical", async () => {
    const before = await snapshot(out);
    const failedStages = new Set<string>();
    let built = false;
    // One page more free space per attempt, from the planned size up, until the build fits.
    for (let leave = exportBytes; !built && leave < exportBytes + 64 * PAGE; leave += PAGE) {
      const filler = await fillDisk(disk, leave);
      try {
        await materializeHf(request(artifactB, dense.base, out, { force: true }));
        built = true;
      } catch (error) {
        expect(error).toMatchObject({ code: "MATERIALIZE_NO_SPACE" });
        const { file, stage } = error as HfConversionError;
        expect((error as Error).message).toContain(file!);
        failedStages.add(stage!);
        expect(await snapshot(out)).toEqual(before);
        expect(await siblings()).toEqual(["teacher"]);
      } finally {
        await rm(filler);
      }
    }
    expect(built).toBe(true);
    expect([...failedStages]).toContain("convert");
  }, 120_000);

  // The steps after the shards are each reached by filling the disk while the build is paused at
  // the event just before them: the last convert event (then the sidecars), the verify event (then
  // the marker).
  for (const { step, at } of [
    {
      step: "sidecars",
      at: (e: MaterializeEvent) => e.type === "convert" && e.file === "model.safetensors.index.json",
    },
    { step: "mark", at: (e: MaterializeEvent) => e.type === "verify" },
  ]) {
    it(`fails the ${step} step with MATERIALIZE_NO_SPACE when the disk fills before it, and succeeds once space is freed`, async () => {
      const before = await snapshot(out);
      let filler: string | undefined;
      const run = materializeHfIter(request(artifactB, dense.base, out, { force: true }));
      const error = await (async () => {
        for (;;) {
          const next = await run.next();
          if (next.done) return undefined;
          if (filler === undefined && at(next.value)) filler = await fillDisk(disk, 0);
        }
      })().catch((e: unknown) => e);
      expect(filler).toBeDefined();
      expect(error).toMatchObject({ code: "MATERIALIZE_NO_SPACE", stage: step });
      expect((error as Error).message).toContain((error as HfConversionError).file!);
      expect(await snapshot(out)).toEqual(before);
      expect(await siblings()).toEqual(["teacher"]);
      await rm(filler!);
      expect((await materializeHf(request(artifactB, dense.base, out, { force: true }))).action).toBe(
        "built",
      );
    });
  }
});
