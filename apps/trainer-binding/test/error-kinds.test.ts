import { describe, expect, it } from "vitest";
import { parseRequest, TrainerBindingError } from "../src/index.js";

// Before @ckpt/errors, TrainerBindingError defaulted a missing kind to `input`; these sites relied on it.
describe("TrainerBindingError kinds", () => {
  it.each([
    ["PROTOCOL_PARSE", "{not json"],
    ["PROTOCOL_BAD_REQUEST", '{"id": 1}'],
    ["PROTOCOL_UNKNOWN_OP", '{"id": 1, "op": "fly"}'],
  ])("%s stays an input error", (code, line) => {
    const parsed = parseRequest(line);
    expect("error" in parsed && parsed.error).toBeInstanceOf(TrainerBindingError);
    expect((parsed as { error: TrainerBindingError }).error).toMatchObject({ code, kind: "input" });
  });
});
