// The decisions of `ckpt ui`'s server, as pure functions: which requests it refuses before routing,
// how the retention knobs are read, and what retention would release after the next save.
import type { EvidenceAttempt } from "@ckpt/evidence";
import { describe, expect, it } from "vitest";
import { retentionOutlook } from "../src/ui/retention-outlook.js";
import { knobsOf, requestRefusal } from "../src/ui/server.js";

const code = (answer: ReturnType<typeof requestRefusal>) =>
  (answer?.body as { error: { code: string } } | undefined)?.error.code;

/** An attempt as the evidence describes it: checkpoints newest first, with retention's view of each. */
function attempt(
  checkpoints: Array<{ iteration: number; hasOptimizer: boolean; upload: string; latest?: boolean }>,
): EvidenceAttempt {
  return {
    run_ts: "20260901120000",
    dir: "/runs/a/20260901120000",
    minted: "first",
    minted_at: null,
    windows: null,
    pointer: { state: "absent" },
    resume: { decision: "fresh", reason: "" },
    artifacts: [],
    checkpoints: checkpoints.map((c) => ({
      iteration: c.iteration,
      dir: `/runs/a/20260901120000/checkpoints/iter_${String(c.iteration).padStart(9, "0")}`,
      depth: "listed",
      format: "consolidated",
      components: [],
      bytes: 0,
      files: null,
      manifest_sha256: null,
      resume: { resumable: null, reason: "", findings: [] },
      retention: {
        latest: c.latest ?? false,
        past_pointer: false,
        has_optimizer: c.hasOptimizer,
        upload: c.upload,
        validation: null,
      },
      last_verify: null,
    })),
  };
}

describe("ckpt ui: requests refused before routing", () => {
  it("answers GET and HEAD for its own host and port only", () => {
    expect(requestRefusal("GET", "127.0.0.1:8470", 8470)).toBeUndefined();
    expect(requestRefusal("HEAD", "LOCALHOST:8470", 8470)).toBeUndefined();
    for (const method of ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", undefined])
      expect(code(requestRefusal(method, "127.0.0.1:8470", 8470)), String(method)).toBe("UI_METHOD_REFUSED");
    for (const host of [
      undefined,
      "",
      "127.0.0.1",
      "127.0.0.1:8471",
      "attacker.example:8470",
      "[::1]:8470",
      "0.0.0.0:8470",
    ])
      expect(code(requestRefusal("GET", host, 8470)), String(host)).toBe("UI_HOST_REFUSED");
  });

  it("reads the retention knobs as whole numbers, upload as 0 or 1, and refuses anything else", () => {
    expect(knobsOf(new URLSearchParams(""))).toEqual({
      keep_model_last: 0,
      keep_optim_last: 0,
      upload: false,
    });
    expect(knobsOf(new URLSearchParams("keep_model_last=3&keep_optim_last=2&upload=1"))).toEqual({
      keep_model_last: 3,
      keep_optim_last: 2,
      upload: true,
    });
    for (const bad of [
      "keep_model_last=-1",
      "keep_optim_last=1.5",
      "keep_model_last=1e3",
      "keep_model_last=99999999",
      "upload=yes",
    ])
      expect(typeof knobsOf(new URLSearchParams(bad)), bad).toBe("string");
  });
});

describe("ckpt ui: what retention would release after the next save", () => {
  const run = attempt([
    { iteration: 300, hasOptimizer: true, upload: "receipt", latest: true },
    { iteration: 200, hasOptimizer: true, upload: "none" },
    { iteration: 100, hasOptimizer: true, upload: "receipt" },
  ]);

  it("keeps everything with both knobs at 0", () => {
    const outlook = retentionOutlook(run, { keep_model_last: 0, keep_optim_last: 0, upload: false });
    expect(outlook.release).toEqual([]);
    expect(outlook.summary).toContain("keeps every checkpoint");
  });

  it("releases the oldest directories beyond keep_model_last, then optimizer state beyond keep_optim_last", () => {
    const outlook = retentionOutlook(run, { keep_model_last: 3, keep_optim_last: 1, upload: false });
    // The next save is the newest of the three kept, so 100 goes whole; 200 and 300 lose their optimizer state.
    expect(outlook.release.map((r) => [r.target, r.iteration])).toEqual([
      ["iteration", 100],
      ["optimizer", 200],
      ["optimizer", 300],
    ]);
    expect(outlook.keep.map((k) => [k.target, k.iteration, k.reason])).toEqual([
      ["iteration", 200, "within_keep_last"],
      ["iteration", 300, "within_keep_last"],
    ]);
  });

  it("with upload on, keeps what is not archived yet (retention's not_uploaded)", () => {
    const outlook = retentionOutlook(run, { keep_model_last: 1, keep_optim_last: 0, upload: true });
    expect(outlook.release.map((r) => r.iteration)).toEqual([100, 300]);
    expect(outlook.keep).toEqual([expect.objectContaining({ iteration: 200, reason: "not_uploaded" })]);
    expect(outlook.summary).toContain("upload on");
  });
});
