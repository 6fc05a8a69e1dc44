import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "..", "src");
const DOC = join(import.meta.dirname, "..", "..", "..", "docs", "archive.md");

async function sources(dir: string): Promise<string> {
  let text = "";
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) text += await sources(path);
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts"))
      text += await readFile(path, "utf8");
  }
  return text;
}

describe("error codes", () => {
  it("every declared code is raised somewhere and documented in docs/archive.md", async () => {
    const errors = await readFile(join(SRC, "errors.ts"), "utf8");
    const declared = [...errors.matchAll(/\| "(READER_[A-Z_]+)"/g)].map((m) => m[1]!);
    expect(declared.length).toBeGreaterThan(10);
    const code = (await sources(SRC)).replace(errors, "");
    const doc = await readFile(DOC, "utf8");
    for (const name of declared) {
      expect(code, name).toContain(`"${name}"`);
      expect(doc, name).toContain(`\`${name}\``);
    }
  });
});
