import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh temporary directory, removed by the returned cleanup (call it from afterEach/onTestFinished). */
export async function makeTempDir(
  prefix = "ckpt-test-",
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
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
export { localHubFetch } from "./hub-fetch.js";

export {
  type S3TestEnv,
  type TestCredentials,
  parseExports,
  s3TestEnv,
  testCredentials,
  rawClient,
  createTestBucket,
  putRawObject,
} from "./s3-env.js";
