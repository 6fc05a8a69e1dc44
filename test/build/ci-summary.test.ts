// tools/ci-summary.mjs, which prints CI's closing line: what the tests leave in /tmp fails the run.
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const SUMMARY = resolve(import.meta.dirname, "..", "..", "tools", "ci-summary.mjs");

/** A report directory holding one package's vitest JSON report of `passed` passing tests. */
async function reports(passed: number): Promise<string> {
  const dir = await testdir("ckpt-ci-summary-");
  await writeFile(join(dir, "pkg.json"), JSON.stringify({ numPassedTests: passed, testResults: [] }));
  return dir;
}

async function summary(args: string[]): Promise<{ code: number; stdout: string }> {
  return run(process.execPath, [SUMMARY, ...args]).then(
    ({ stdout }) => ({ code: 0, stdout }),
    (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
  );
}

describe("tools/ci-summary.mjs --tmp", () => {
  it("names each new /tmp entry and counts the litter as one failed test; the run's own services are not litter", async () => {
    const dir = await reports(3);
    await writeFile(join(dir, "before.txt"), "ckpt-ci-ceph\nsystemd-private-x\n");
    await writeFile(
      join(dir, "after.txt"),
      "ckpt-ci-ceph\nckpt-test-reports.abc\nckpt-hf-probe-1\nsystemd-private-x\ntorchinductor_root\n",
    );
    const dirty = await summary([
      dir,
      "0",
      "--tmp",
      join(dir, "before.txt"),
      join(dir, "after.txt"),
      "ckpt-test-reports.abc",
      "ckpt-ci-ceph",
    ]);
    expect(dirty.code).toBe(1);
    expect(dirty.stdout).toContain(
      "tests left 2 entries in /tmp (one failed test): ckpt-hf-probe-1, torchinductor_root\n",
    );
    expect(dirty.stdout.trimEnd().split("\n").at(-1)).toBe("ci: 3 passed, 1 failed");

    await writeFile(join(dir, "after.txt"), "ckpt-ci-ceph\nckpt-test-reports.abc\nsystemd-private-x\n");
    const clean = await summary([
      dir,
      "0",
      "--tmp",
      join(dir, "before.txt"),
      join(dir, "after.txt"),
      "ckpt-test-reports.abc",
    ]);
    expect(clean.code).toBe(0);
    expect(clean.stdout).toContain("tests left nothing in /tmp\n");
    expect(clean.stdout.trimEnd().split("\n").at(-1)).toBe("ci: 3 passed, 0 failed");
  });
});
