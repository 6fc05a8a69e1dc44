import type { Options } from "tsup";

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
  };
}
