import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Options } from "tsup";

/** `define` entries that give the code of the package in `packageDir` its package.json version. */
export function versionDefine(packageDir: string): Record<string, string> {
  const { version } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
    version: string;
  };
  return { __CKPT_PACKAGE_VERSION__: JSON.stringify(version) };
}

/** One build for every package: ESM + CJS + .d.ts from src/index.ts (plus any extra entries). */
export function packageBuild(extraEntries: Record<string, string> = {}): Options {
  return {
    entry: { index: "src/index.ts", ...extraEntries },
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    clean: true,
    target: "node20",
    platform: "node",
    splitting: false,
    treeshake: true,
    // tsup runs in the package's directory (its `build` script).
    define: versionDefine(process.cwd()),
  };
}
