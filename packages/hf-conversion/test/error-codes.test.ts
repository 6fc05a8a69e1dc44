import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "..", "src");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

describe("error codes", () => {
  it("every code of HfConversionErrorCode is raised somewhere, and only those are", () => {
    const declared = [
      ...readFileSync(join(SRC, "errors.ts"), "utf8").matchAll(/\| "(MATERIALIZE_[A-Z_]+)"/g),
    ].map((m) => m[1]);
    const used = new Set<string>();
    for (const file of sources(SRC).filter((f) => !f.endsWith("errors.ts"))) {
      for (const m of readFileSync(file, "utf8").matchAll(/"(MATERIALIZE_[A-Z_]+)"/g)) used.add(m[1]!);
    }
    expect(declared.length).toBeGreaterThan(20);
    expect([...used].sort()).toEqual([...declared].sort());
  });
});
