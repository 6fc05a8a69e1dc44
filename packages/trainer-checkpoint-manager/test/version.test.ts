import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MANAGER_VERSION } from "../src/index.js";

describe("MANAGER_VERSION", () => {
  it("is the version in the package's package.json (defined at build time)", () => {
    const pkg = JSON.parse(readFileSync(join(import.meta.dirname, "..", "package.json"), "utf8"));
    expect(MANAGER_VERSION).toBe(pkg.version);
  });
});
