import { basename } from "node:path";
import { defineConfig } from "vitest/config";
import { versionDefine } from "./tsup.base.ts";

/**
 * The tags that keep a test out of the fast lane (`pnpm test:unit`, i.e. `vitest run --mode unit`):
 * a file says `// @module-tag s3`, a suite or test `{ tags: ["s3"] }`. The normal `test` runs them all.
 */
const SLOW_LANE_TAGS = [
  { name: "s3", description: "Talks to a real S3 server (Ceph RGW) through the shared global setup." },
  {
    name: "torch",
    description:
      "Runs PyTorch or numpy: Debian's torch 1.13 (CKPT_TEST_PYTHON) or the torch 2 .venv (CKPT_PYTHON).",
  },
  { name: "crash", description: "Kills child processes mid-operation and checks what survives." },
] as const;

/**
 * One test config for every workspace package. When CKPT_REPORT_DIR is set (CI), each package
 * also writes a JSON report there, which .ci/run sums into its closing `ci:` line, and the line and
 * branch coverage of its src/ (V8's own counters) into coverage/<package>/coverage-summary.json there,
 * which tools/ci-summary.mjs prints as a table.
 */
export function packageTests(
  packageDir: string,
  overrides: { testTimeout?: number; include?: string[]; realS3?: boolean } = {},
) {
  const reportDir = process.env.CKPT_REPORT_DIR;
  const reporters: Array<string | [string, Record<string, unknown>]> = ["default"];
  if (reportDir) reporters.push(["json", { outputFile: `${reportDir}/${basename(packageDir)}.json` }]);
  return defineConfig(({ mode }) => {
    const unitLane = mode === "unit";
    return {
      define: versionDefine(packageDir),
      test: {
        include: overrides.include ?? ["src/**/*.test.ts", "test/**/*.test.ts"],
        testTimeout: overrides.testTimeout ?? 30_000,
        hookTimeout: 120_000,
        pool: "forks",
        maxWorkers: 2,
        reporters,
        ...(reportDir
          ? {
              coverage: {
                enabled: true,
                provider: "v8" as const,
                include: ["src/**/*.ts"],
                exclude: ["src/**/*.test.ts"],
                reporter: ["json-summary"],
                reportsDirectory: `${reportDir}/coverage/${basename(packageDir)}`,
              },
            }
          : {}),
        passWithNoTests: true,
        tags: [...SLOW_LANE_TAGS],
        ...(unitLane ? { tagsFilter: [SLOW_LANE_TAGS.map((t) => `!${t.name}`).join(" && ")] } : {}),
        // Tests that talk to a real S3 server find it through tools/test-utils' global setup: the
        // server named by the environment (CI), else a private Ceph RGW started for this run. The
        // fast lane runs no S3 test, so it starts no server.
        ...(overrides.realS3 && !unitLane
          ? { globalSetup: [`${import.meta.dirname}/../test-utils/src/s3-global-setup.ts`] }
          : {}),
      },
    };
  });
}
