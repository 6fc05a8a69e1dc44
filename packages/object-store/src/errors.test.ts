import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return (
    entries
      .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts"))
      .map((e) => join(e.parentPath, e.name))
      // The file that declares the codes cannot count as raising them; s3/errors.ts and gcs/errors.ts do.
      .filter((path) => path !== join(dir, "errors.ts"))
  );
}

describe("ObjectStoreErrorCode", () => {
  it("has no dead code: every declared code is raised somewhere in the package", async () => {
    const declared = [
      ...(await readFile(join(import.meta.dirname, "errors.ts"), "utf8")).matchAll(/\| "(STORE_[A-Z_]+)"/g),
    ].map((m) => m[1]!);
    expect(declared.length).toBeGreaterThan(10);
    const text = (
      await Promise.all((await sources(import.meta.dirname)).map((f) => readFile(f, "utf8")))
    ).join("\n");
    expect(declared.filter((code) => !text.includes(`"${code}"`))).toEqual([]);
  });
});
