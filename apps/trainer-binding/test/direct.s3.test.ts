// @module-tag s3
// @module-tag torch
// The direct object-store primary from the ranks (test/python/test_direct.py): 2 gloo ranks of
// examples/train_fsdp2.py stream DCP through their own `ckpt-trainer data` processes to the real
// S3 server, are SIGKILLed inside saves (CKPT_CRASH_KILLS, default 20; replay with
// CKPT_CRASH_SEED) and resume in place bit-exactly; a damaged shard is refused by digest.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  createTestBucket,
  s3TestEnv,
  seedFrom,
  testCredentials,
  testdir,
  torch2Python,
} from "@ckpt/test-utils";
import { afterAll, beforeAll } from "vitest";
import { crashLoopTimeoutMs, pythonSuite } from "./python-suite.js";

const seed = seedFrom("CKPT_CRASH_SEED");

let bucket = "";
let credentials = "";
let cleanup: () => Promise<void> = async () => {};

beforeAll(async () => {
  ({ bucket, cleanup } = await createTestBucket(s3TestEnv(), "direct"));
  credentials = join(await testdir("ckpt-direct-cred-"), "s3-credentials.json");
  await writeFile(credentials, JSON.stringify(testCredentials(s3TestEnv())));
});
afterAll(async () => {
  await cleanup();
});

pythonSuite(
  `direct object-store primary from the ranks (real S3, crash seed ${seed})`,
  "test_direct",
  torch2Python,
  () => ({ CKPT_DIRECT_BUCKET: bucket, CKPT_DIRECT_CREDENTIALS: credentials, CKPT_CRASH_SEED: String(seed) }),
  // Under a loaded machine a kill cycle (two PyTorch start-ups, a save to the store) has taken 90 s.
  crashLoopTimeoutMs(2_700_000, 20),
);
