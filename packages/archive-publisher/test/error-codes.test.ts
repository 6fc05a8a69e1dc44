import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ARCHIVE_PUBLISHER_ERROR_CODES } from "../src/index.js";

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sources(path)));
    else if (entry.name.endsWith(".ts") && entry.name !== "errors.ts") out.push(await readFile(path, "utf8"));
  }
  return out;
}

describe("error codes", () => {
  it("every declared code is raised somewhere and documented in docs/archive.md", async () => {
    const text = (await sources(join(import.meta.dirname, "../src"))).join("\n");
    const docs = await readFile(join(import.meta.dirname, "../../../docs/archive.md"), "utf8");
    for (const code of ARCHIVE_PUBLISHER_ERROR_CODES) {
      expect(text, code).toContain(`"${code}"`);
      expect(docs, code).toContain(`\`${code}\``);
    }
  });
});
