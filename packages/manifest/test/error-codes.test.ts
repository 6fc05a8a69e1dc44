import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";

const SRC = join(import.meta.dirname, "..", "src");
const OWNED = ["json", "records", "paths", "layout"];
const DOC = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "formats.md"), "utf8");
const CODE = /"((?:JSON|RECORD|PATH|LAYOUT)_[A-Z_]+)"/g;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : [];
  });
}

it("documents every error code the records, paths and layout modules raise, and no other", () => {
  const raised = new Set(
    OWNED.flatMap((d) => sources(join(SRC, d))).flatMap((f) =>
      [...readFileSync(f, "utf8").matchAll(CODE)].map((m) => m[1]!),
    ),
  );
  const documented = new Set([...DOC.matchAll(/`((?:JSON|RECORD|PATH|LAYOUT)_[A-Z_]+)`/g)].map((m) => m[1]!));
  expect([...raised].sort()).toEqual([...documented].sort());
});
