import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  artifactPrefixFor,
  checkpointPrefixFor,
  classifyIterPath,
  defaultCheckpointPrefix,
  formatIterDir,
  formatRunTs,
  isRunTs,
  parseIterDir,
  parseRunTs,
  runAttemptDir,
} from "../src/index.js";
import { requireIterDir } from "../src/layout/iter.js";
import { artifactsPrefixFor, checkpointRootDir } from "../src/layout/prefixes.js";
import { assertRunTs, mintRunTs } from "../src/layout/run-ts.js";

const run = { project: "vlm", group: "grpo", name: "run-a", runTs: "20260901120000" };

describe("iteration directories", () => {
  it("formats with nine digits and parses any digit count", () => {
    expect(formatIterDir(100)).toBe("iter_000000100");
    expect(formatIterDir(0)).toBe("iter_000000000");
    expect(formatIterDir(1_234_567_890)).toBe("iter_1234567890");
    expect(parseIterDir("iter_000300")).toBe(300);
    expect(parseIterDir("iter_7")).toBe(7);
    fc.assert(
      fc.property(fc.nat(), (n) => {
        expect(parseIterDir(formatIterDir(n))).toBe(n);
      }),
    );
  });

  it.each(["iter_", "iter_-1", "iter_1a", "ITER_1", "iter_1/", "xiter_1", "iter_99999999999999999"])(
    "does not take %j for an iteration directory",
    (name) => {
      expect(parseIterDir(name)).toBeUndefined();
      expect(() => requireIterDir(name, "--out")).toThrow(
        expect.objectContaining({ code: "LAYOUT_BAD_ITER_DIR" }),
      );
    },
  );

  it("refuses to format a negative or fractional iteration", () => {
    expect(() => formatIterDir(-1)).toThrow(expect.objectContaining({ code: "LAYOUT_BAD_ITERATION" }));
    expect(() => formatIterDir(1.5)).toThrow(expect.objectContaining({ code: "LAYOUT_BAD_ITERATION" }));
  });
});

describe("run-attempt timestamps", () => {
  it("mints from the injected clock in UTC", () => {
    expect(mintRunTs(() => new Date("2026-09-01T12:00:05Z"))).toBe("20260901120005");
    expect(parseRunTs("20260901120005")?.toISOString()).toBe("2026-09-01T12:00:05.000Z");
  });

  it("round-trips any second in four-digit years", () => {
    const min = Date.UTC(1000, 0, 1);
    const max = Date.UTC(9999, 11, 31, 23, 59, 59);
    fc.assert(
      fc.property(fc.integer({ min: min / 1000, max: max / 1000 }), (s) => {
        const ts = formatRunTs(new Date(s * 1000));
        expect(parseRunTs(ts)?.getTime()).toBe(s * 1000);
      }),
    );
  });

  it.each([
    "2026090112000",
    "202609011200000",
    "20260231120000",
    "20261301120000",
    "20260901240000",
    "20260901126000",
    "2026-09-01T12",
  ])("refuses %j", (text) => {
    expect(isRunTs(text)).toBe(false);
    expect(() => assertRunTs(text, "rl.run_ts")).toThrow(
      expect.objectContaining({ code: "LAYOUT_BAD_RUN_TS" }),
    );
  });

  it("refuses an invalid clock", () => {
    expect(() => mintRunTs(() => new Date(Number.NaN))).toThrow(
      expect.objectContaining({ code: "LAYOUT_BAD_RUN_TS" }),
    );
  });
});

describe("prefixes and roots", () => {
  it("derives the default prefix and the sibling artifacts prefix", () => {
    const prefix = defaultCheckpointPrefix(run);
    expect(prefix).toBe("vlm/grpo/run-a/20260901120000/checkpoints");
    expect(artifactsPrefixFor(prefix)).toBe("vlm/grpo/run-a/20260901120000/checkpoint_artifacts");
    expect(artifactPrefixFor(prefix, 300)).toBe(
      "vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300",
    );
    expect(artifactPrefixFor(`${prefix}/`, 300)).toBe(artifactPrefixFor(prefix, 300));
    expect(artifactPrefixFor("checkpoints", 1)).toBe("checkpoint_artifacts/iter_000000001");
    expect(checkpointPrefixFor(prefix, 100)).toBe(`${prefix}/iter_000000100`);
  });

  it("refuses an upload prefix that is not a checkpoints root", () => {
    expect(() => artifactPrefixFor("vlm/grpo/run-a/20260901120000", 1)).toThrow(
      expect.objectContaining({ code: "LAYOUT_NOT_CHECKPOINTS_PREFIX" }),
    );
    expect(() => artifactPrefixFor("vlm/../checkpoints", 1)).toThrow(
      expect.objectContaining({ code: "PATH_TRAVERSAL" }),
    );
    expect(() => artifactPrefixFor("/abs/checkpoints", 1)).toThrow(
      expect.objectContaining({ code: "PATH_ABSOLUTE" }),
    );
  });

  it("refuses run names that are not single segments", () => {
    expect(() => defaultCheckpointPrefix({ ...run, name: "a/b" })).toThrow(
      expect.objectContaining({ code: "LAYOUT_BAD_SEGMENT" }),
    );
    expect(() => defaultCheckpointPrefix({ ...run, group: ".." })).toThrow(
      expect.objectContaining({ code: "LAYOUT_BAD_SEGMENT" }),
    );
    expect(() => defaultCheckpointPrefix({ ...run, runTs: "latest" })).toThrow(
      expect.objectContaining({ code: "LAYOUT_BAD_RUN_TS" }),
    );
  });

  it("places and recognises local iteration directories", () => {
    const attempt = runAttemptDir("/out", run);
    expect(attempt).toBe("/out/vlm/grpo/run-a/20260901120000");
    const iterDir = join(checkpointRootDir(attempt, "checkpoint_artifacts"), formatIterDir(300));
    expect(classifyIterPath(iterDir)).toEqual({
      root: "checkpoint_artifacts",
      iteration: 300,
      iterDirName: "iter_000000300",
      attemptDir: attempt,
    });
    expect(classifyIterPath(`${attempt}/checkpoints/iter_000300/`)?.root).toBe("checkpoints");
    expect(classifyIterPath(`${attempt}/elsewhere/iter_000000300`)).toBeUndefined();
    expect(classifyIterPath(`${attempt}/checkpoints/latest`)).toBeUndefined();
  });
});
