// @module-tag s3
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll } from "vitest";
import { createS3Store } from "../src/s3/store.js";
import { describeStoreContract } from "./contract.js";
import { createTestBucket, s3TestEnv, testCredentials } from "@ckpt/test-utils";

// The shared contract against a real Ceph RGW (see test/global-setup.ts for how it is found).
const env = s3TestEnv();
let bucket = "";
let cleanup: () => Promise<void> = async () => {};
beforeAll(async () => {
  ({ bucket, cleanup } = await createTestBucket(env, "contract"));
});
afterAll(() => cleanup());

const fresh = (prefix: string) => async () => ({
  store: createS3Store({
    bucket,
    prefix: `${prefix}-${randomBytes(4).toString("hex")}`,
    credentials: testCredentials(env),
    retry: { retries: 2, baseDelayMs: 50 },
    env: {},
  }),
  // The bucket (with everything in it) is removed once, after the file.
  cleanup: async () => {},
});

describeStoreContract("s3 (Ceph RGW)", fresh("runs/r1"));
describeStoreContract("s3 (Ceph RGW), neighbour prefix", fresh("runs/r1x"));
