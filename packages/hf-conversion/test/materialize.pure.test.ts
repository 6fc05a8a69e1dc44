// materializeHf's refusals that come before anything is read: no generated fixture, so they run in
// the fast lane.
import { testdir } from "@ckpt/test-utils";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { materializeHf } from "../src/index.js";
import { inStage } from "../src/materialize/materialize.js";
import { request } from "./helpers.js";

/** Paths in a fresh directory: the options are checked before any is opened, so none need exist. */
async function paths(): Promise<{ artifact: string; base: string; out: string }> {
  const root = await testdir("ckpt-hf-options-");
  return {
    artifact: join(root, "art-a", "iter_000000100"),
    base: join(root, "dense", "base"),
    out: join(root, "out", "teacher"),
  };
}

describe("options and sources", () => {
  it.each([
    [{ lockWaitSeconds: Number.POSITIVE_INFINITY }, /inf and nan are refused/],
    [{ lockWaitSeconds: Number.NaN }, /inf and nan are refused/],
    [{ lockWaitSeconds: -1 }, /finite number of seconds >= 0/],
    [{ minTensors: 1.5 }, /--min-tensors 1\.5 is not a whole number/],
    [{ stageDir: "/tmp/x" }, /apply to --artifact-uri only/],
  ])("refuses %j as bad usage", async (extra, message) => {
    const { artifact, base, out } = await paths();
    await expect(materializeHf(request(artifact, base, out, extra))).rejects.toMatchObject({
      code: "MATERIALIZE_BAD_OPTION",
      kind: "input",
      message: expect.stringMatching(message),
    });
  });

  it("refuses an output inside the base", async () => {
    const { artifact, base } = await paths();
    await expect(materializeHf(request(artifact, base, join(base, "out")))).rejects.toThrow(/overlap/);
  });
});

describe("errors from below, in their stage", () => {
  it("an abort noticed by the reader or the store is the materialize's abort, not a build failure", () => {
    const readerAbort = Object.assign(new Error("fetch s3://b/p: aborted before it finished."), {
      code: "READER_ABORTED",
    });
    expect(inStage(readerAbort, "source", "/o/teacher")).toMatchObject({
      code: "MATERIALIZE_ABORTED",
      stage: "source",
      cause: readerAbort,
    });
    const storeFailure = Object.assign(new Error("get s3://b/p/model.pt: denied"), {
      code: "STORE_ACCESS_DENIED",
    });
    expect(inStage(storeFailure, "source", "/o/teacher")).toMatchObject({ code: "MATERIALIZE_BUILD_FAILED" });
  });
});
