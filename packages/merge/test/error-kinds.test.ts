import { describe, expect, it } from "vitest";
import { MergeError, resolveMergeRequest } from "../src/index.js";

const out = "run/20260901120000/checkpoint_artifacts/iter_000000300/model.pt";

// Before @ckpt/errors, MergeError defaulted a missing kind to `input`; these sites relied on it.
describe("MergeError kinds", () => {
  it.each([
    ["MERGE_BAD_REQUEST", { mode: "median", experts: ["a.pt", "b.pt"], out }],
    ["MERGE_BAD_DIAG_PATH", { mode: "avg", experts: ["a.pt", "b.pt"], out, diag: "" }],
    ["MERGE_BAD_OUT_PATH", { mode: "avg", experts: ["a.pt", "b.pt"], out: "somewhere/model.pt" }],
  ])("%s stays an input error (exit 2)", (code, options) => {
    let caught: unknown;
    try {
      resolveMergeRequest(options as Parameters<typeof resolveMergeRequest>[0], "/work");
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(MergeError);
    expect(caught).toMatchObject({ code, kind: "input" });
  });
});
