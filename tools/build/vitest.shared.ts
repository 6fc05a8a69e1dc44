import { basename } from "node:path";
import { defineConfig } from "vitest/config";

/**
 * One test config for every workspace package. When CKPT_REPORT_DIR is set (CI), each package
 * also writes a JSON report there, which .ci/run sums into its closing `ci:` line.
 */
export function packageTests(
  packageDir: string,
  overrides: { testTimeout?: number; include?: string[]; realS3?: boolean } = {},
) {
  const reportDir = process.env.CKPT_REPORT_DIR;
  const reporters: Array<string | [string, Record<string, unknown>]> = ["default"];
  if (reportDir) reporters.push(["json", { outputFile: `${reportDir}/${basename(packageDir)}.json` }]);
  return defineConfig({
    test: {
      include: overrides.include ?? ["src/**/*.test.ts", "test/**/*.test.ts"],
      testTimeout: overrides.testTimeout ?? 30_000,
      hookTimeout: 120_000,
      pool: "forks",
      maxWorkers: 2,
      reporters,
      passWithNoTests: true,
      // Tests that talk to a real S3 server find it through tools/test-utils' global setup: the
      // server named by the environment (CI), else a private Ceph RGW started for this run.
      ...(overrides.realS3
        ? { globalSetup: [`${import.meta.dirname}/../test-utils/src/s3-global-setup.ts`] }
        : {}),
    },
  });
}
