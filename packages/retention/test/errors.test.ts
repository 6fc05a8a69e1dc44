import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "..", "src");

describe("RetentionErrorCode", () => {
  it("has no dead code: every declared code is raised somewhere in the package", async () => {
    const declared = [
      ...(await readFile(join(SRC, "errors.ts"), "utf8")).matchAll(/\| "(RETENTION_[A-Z_]+)"/g),
    ].map((m) => m[1]!);
    expect(declared.length).toBeGreaterThan(5);
    const files = (await readdir(SRC, { recursive: true })).filter(
      (f) => f.endsWith(".ts") && f !== "errors.ts",
    );
    const text = (await Promise.all(files.map((f) => readFile(join(SRC, f), "utf8")))).join("\n");
    expect(declared.filter((code) => !text.includes(`"${code}"`))).toEqual([]);
  });
});
