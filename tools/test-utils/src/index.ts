import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, onTestFinished, TestRunner } from "vitest";
import { mountTmpfs } from "./small-disk.js";

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
function untilDone(cleanup: () => Promise<void>): void {
  if (TestRunner.getCurrentTest() !== undefined) onTestFinished(cleanup);
  else fileDirs.push(cleanup);
}

/**
 * A real small disk for full-disk tests: a tmpfs of `bytes` mounted in a fresh temporary directory,
 * unmounted and removed like `testdir`'s directories. Needs root (the suites run as root in CI).
 */
export async function smallDisk(bytes: number): Promise<string> {
  const { dir, cleanup } = await makeTempDir("ckpt-small-disk-");
  const disk = join(dir, "disk");
  const unmount = await mountTmpfs(disk, bytes).catch(async (error: unknown) => {
    await cleanup();
    throw error;
  });
  untilDone(async () => {
    unmount();
    await cleanup();
  });
  return disk;
}

/** True when running in CI, where a missing dependency must fail a test instead of skipping it. */
export const inCI = process.env.CI === "true" || process.env.CI === "1";

export {
  type HfFixture,
  HF_FIXTURE_GENERATOR,
  TORCH_FIXTURE_TIMEOUT_MS,
  TORCH_PYTHON,
  makeHfFixture,
  makeModelArtifact,
  materializeHfArgs,
} from "./hf-fixtures.js";
export {
  type DcpFixture,
  type DcpFixtureStorage,
  DCP_FIXTURE_GENERATOR,
  DCP_FIXTURE_TIMEOUT_MS,
  makeDcpFixtures,
  type RealDcpFixtures,
  realDcpFixtures,
} from "./dcp-fixtures.js";
export { localHubFetch } from "./hub-fetch.js";
export { fillDisk } from "./small-disk.js";
export { TORCH2_PYTHON, torch2Python } from "./python.js";
export {
  REFERENCE_SAFETENSORS,
  type ReferenceReading,
  type ReferenceTensor,
  referenceSafetensors,
} from "./reference-safetensors.js";
export {
  type ExpertLayout,
  loadWithTransformers,
  makeTransformersFixture,
  TRANSFORMERS_MODELS,
  type TransformersFixture,
  type TransformersLoad,
  type TransformersModel,
} from "./transformers-models.js";
export { mulberry32, randomInt, seededBytes, seedFrom } from "./rng.js";

export {
  type S3TestEnv,
  type TestCredentials,
  parseExports,
  s3TestEnv,
  testCredentials,
  rawClient,
  createTestBucket,
  openMultipartUploads,
  putRawObject,
  startIncompleteUpload,
} from "./s3-env.js";
