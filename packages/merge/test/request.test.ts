import { describe, expect, it } from "vitest";
import { DEFAULT_DIAGNOSTICS_FILE, resolveMergeRequest } from "../src/index.js";

const cwd = "/work/runs";
const out = "run/20260901120000/checkpoint_artifacts/iter_000000300/model.pt";
const base = { mode: "avg", experts: ["a/model.pt", "b/model.pt"], out };

describe("resolveMergeRequest", () => {
  it("resolves paths against cwd, reads the iteration from the directory and defaults the diagnostics into the artifact", () => {
    const r = resolveMergeRequest(base, cwd);
    expect(r).toMatchObject({
      mode: "avg",
      experts: ["/work/runs/a/model.pt", "/work/runs/b/model.pt"],
      base: null,
      lam: null,
      out: `/work/runs/${out}`,
      iterDir: "/work/runs/run/20260901120000/checkpoint_artifacts/iter_000000300",
      iteration: 300,
      diagnostics: { location: "artifact", path: DEFAULT_DIAGNOSTICS_FILE },
      force: false,
    });
  });

  it("keeps the expert order as given (it is part of the identity)", () => {
    expect(resolveMergeRequest({ ...base, experts: ["b.pt", "a.pt", "b.pt"] }, "/x").experts).toEqual([
      "/x/b.pt",
      "/x/a.pt",
      "/x/b.pt",
    ]);
  });

  it("tv defaults lam to 1 and needs a base", () => {
    expect(resolveMergeRequest({ ...base, mode: "tv", base: "hf" }, cwd)).toMatchObject({
      lam: 1,
      base: "/work/runs/hf",
    });
    expect(resolveMergeRequest({ ...base, mode: "tv", base: "hf", lam: -0.5 }, cwd).lam).toBe(-0.5);
    expect(() => resolveMergeRequest({ ...base, mode: "tv" }, cwd)).toThrow(
      expect.objectContaining({ code: "MERGE_BAD_REQUEST", message: expect.stringContaining("--base") }),
    );
  });

  it.each([
    ["an unknown mode", { mode: "ties" }, "MERGE_BAD_REQUEST"],
    ["no experts", { experts: [] }, "MERGE_BAD_REQUEST"],
    ["an empty expert path", { experts: ["a.pt", ""] }, "MERGE_BAD_REQUEST"],
    ["lam in avg mode", { lam: 1 }, "MERGE_BAD_REQUEST"],
    ["a non-finite lam", { mode: "tv", base: "hf", lam: Number.NaN }, "MERGE_BAD_REQUEST"],
    ["a huge lam", { mode: "tv", base: "hf", lam: 1e7 }, "MERGE_BAD_REQUEST"],
    ["an out that is not model.pt", { out: "x/iter_000000300/merged.pt" }, "MERGE_BAD_OUT_PATH"],
    ["an out outside an iter_ directory", { out: "x/step_300/model.pt" }, "MERGE_BAD_OUT_PATH"],
    ["an iteration that disagrees", { iteration: 301 }, "MERGE_ITERATION_MISMATCH"],
    [
      "a diag that is a record name",
      { diag: `${out.replace("model.pt", "")}.uploaded` },
      "MERGE_BAD_DIAG_PATH",
    ],
    ["a diag that is a .pt name", { diag: `${out.replace("model.pt", "")}optim.pt` }, "MERGE_BAD_DIAG_PATH"],
    [
      "a diag in a subdirectory of the artifact",
      { diag: `${out.replace("model.pt", "")}d/x.json` },
      "MERGE_BAD_DIAG_PATH",
    ],
    ["a diag that is the artifact directory", { diag: out.replace("/model.pt", "") }, "MERGE_BAD_DIAG_PATH"],
    ["an empty diag", { diag: " " }, "MERGE_BAD_DIAG_PATH"],
  ])("refuses %s", (_label, change, code) => {
    expect(() => resolveMergeRequest({ ...base, ...change }, cwd)).toThrow(
      expect.objectContaining({ code, kind: "input" }),
    );
  });

  it("accepts a matching --iteration and any digit count in the directory name", () => {
    expect(resolveMergeRequest({ ...base, iteration: 300 }, cwd).iteration).toBe(300);
    expect(
      resolveMergeRequest({ ...base, out: "a/iter_000300/model.pt", iteration: 300 }, cwd).iteration,
    ).toBe(300);
  });

  it("places diagnostics inside the artifact when --diag names a file there, elsewhere otherwise", () => {
    const inside = resolveMergeRequest({ ...base, diag: out.replace("model.pt", "tv-diag.json") }, cwd);
    expect(inside.diagnostics).toEqual({ location: "artifact", path: "tv-diag.json" });
    const outside = resolveMergeRequest({ ...base, diag: "diag.json" }, cwd);
    expect(outside.diagnostics).toEqual({ location: "external", path: "/work/runs/diag.json" });
  });
});
