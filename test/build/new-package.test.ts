// tools/new-package.mjs writes what the real packages have: run it into a scratch workspace and
// compare the package it wrote with @ckpt/manifest, and let biome judge its files.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const repoRoot = resolve(import.meta.dirname, "..", "..");
const REFERENCE = "packages/manifest";

const packageJson = async (dir: string) => JSON.parse(await readFile(join(dir, "package.json"), "utf8"));

describe("tools/new-package.mjs", () => {
  let created: string;

  beforeAll(async () => {
    const root = await testdir("ckpt-new-package-");
    await run(process.execPath, [join(repoRoot, "tools/new-package.mjs"), "packages/widget", "Widgets."], {
      cwd: root,
    });
    created = join(root, "packages/widget");
  });

  it("writes the scripts, exports map and fields of a real package", async () => {
    const made = await packageJson(created);
    const real = await packageJson(join(repoRoot, REFERENCE));
    expect(Object.keys(made.scripts)).toEqual(Object.keys(real.scripts));
    expect(made.scripts.lint).toBe(real.scripts.lint);
    expect(made.exports).toEqual(real.exports);
    const fields = (pkg: Record<string, unknown>) =>
      Object.keys(pkg).filter((key) => !["dependencies", "devDependencies"].includes(key));
    expect(fields(made)).toEqual(fields(real));
    for (const file of ["tsconfig.json", "tsup.config.ts", "vitest.config.ts"]) {
      expect(await readFile(join(created, file), "utf8")).toBe(
        await readFile(join(repoRoot, REFERENCE, file), "utf8"),
      );
    }
    expect(await readFile(join(created, "CHANGELOG.md"), "utf8")).toMatch(/^# @ckpt\/widget\n/);
  });

  it("writes files biome accepts as they are", async () => {
    const biome = join(repoRoot, "node_modules", ".bin", "biome");
    await expect(
      run(biome, ["check", "--config-path", repoRoot, created], { cwd: repoRoot }),
    ).resolves.toBeDefined();
  }, 60_000);
});
