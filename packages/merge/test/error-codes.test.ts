import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const src = join(import.meta.dirname, "..", "src");
const codes = [...readFileSync(join(src, "errors.ts"), "utf8").matchAll(/\| "(MERGE_[A-Z_]+)"/g)].map(
  (m) => m[1]!,
);
const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith(".ts") && e.name !== "errors.ts"
        ? [readFileSync(join(dir, e.name), "utf8")]
        : [],
  );

describe("MergeError codes", () => {
  it("lists the codes", () => {
    expect(codes.length).toBeGreaterThan(15);
  });

  it.each(codes)("%s is raised somewhere and documented in docs/merge.md", (code) => {
    expect(sources(src).some((text) => text.includes(`"${code}"`))).toBe(true);
    expect(readFileSync(join(src, "..", "..", "..", "docs", "merge.md"), "utf8")).toContain(`\`${code}\``);
  });
});
