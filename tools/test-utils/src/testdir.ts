// The temporary directories of every test: fresh, and removed when the test (or, made in a hook,
// the test file) ends. A module of its own, importable as `@ckpt/test-utils/testdir` by a test
// that must not load the rest of this package (the AWS SDK behind its bucket helpers).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, onTestFinished, TestRunner } from "vitest";

/** A fresh temporary directory, removed by the returned cleanup (for a lifetime no hook expresses). */
export async function makeTempDir(
  prefix = "ckpt-test-",
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

// Directories made outside a test (in a beforeAll) live until the test file ends. A hook cannot
// register an afterAll (vitest drops it), so this module registers one per file as it is imported
// during the file's collection (each file imports it afresh: forks are isolated).
const fileDirs: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of fileDirs.splice(0)) await cleanup();
});

/**
 * A fresh temporary directory removed automatically: when the current test finishes, or, made in a
 * hook such as `beforeAll`, when the test file ends.
 */
export async function testdir(prefix = "ckpt-test-"): Promise<string> {
  const { dir, cleanup } = await makeTempDir(prefix);
  untilDone(cleanup);
  return dir;
}

/** Runs `cleanup` when the current test finishes, or, called from a hook, when the test file ends. */
export function untilDone(cleanup: () => Promise<void>): void {
  if (TestRunner.getCurrentTest() !== undefined) onTestFinished(cleanup);
  else fileDirs.push(cleanup);
}
