import { describe, expect, it } from "vitest";
import { formatIterDir, ManifestError, parseStrictJson } from "../src/index.js";
import { assertRunTs } from "../src/layout/run-ts.js";
import { assertSafeRelativePath } from "../src/paths/safe.js";

// Before @ckpt/errors, ManifestError defaulted a missing kind to `input`; these sites relied on it.
describe("ManifestError kinds", () => {
  const kindOfThrow = (run: () => unknown) => {
    try {
      run();
    } catch (error) {
      expect(error).toBeInstanceOf(ManifestError);
      return (error as ManifestError).kind;
    }
    throw new Error("did not throw");
  };

  it("bad JSON, unsafe paths and bad layout names stay input errors (exit 2)", () => {
    expect(kindOfThrow(() => parseStrictJson('{"a":1,"a":2}', { name: "x.json" }))).toBe("input");
    expect(kindOfThrow(() => assertSafeRelativePath("../up", "test"))).toBe("input");
    expect(kindOfThrow(() => formatIterDir(-1))).toBe("input");
    expect(kindOfThrow(() => assertRunTs("yesterday", "test"))).toBe("input");
  });
});
