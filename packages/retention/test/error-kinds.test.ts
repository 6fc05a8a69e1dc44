import { describe, expect, it } from "vitest";
import { bestN, latestN, RetentionError } from "../src/index.js";

// Before @ckpt/errors, RetentionError defaulted a missing kind to `input`; these sites relied on it.
describe("RetentionError kinds", () => {
  it("bad policy arguments stay input errors (exit 2)", () => {
    for (const build of [
      () => bestN({ metric: "", n: 1, mode: "min" }),
      () => bestN({ metric: "loss", n: 1, mode: "median" as "min" }),
      () => latestN(-1),
    ]) {
      expect(build).toThrow(RetentionError);
      try {
        build();
      } catch (error) {
        expect((error as RetentionError).kind).toBe("input");
      }
    }
  });
});
