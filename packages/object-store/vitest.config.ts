import { mergeConfig } from "vitest/config";
import { packageTests } from "../../tools/build/vitest.shared.ts";

// The S3 tests run against a real Ceph RGW: the shared S3 global setup (tools/test-utils) uses the server named by the
// environment (AWS_ENDPOINT_URL, ..., CKPT_TEST_S3_BUCKET) or starts a private one.
export default mergeConfig(packageTests(import.meta.dirname), {
  test: { globalSetup: ["../../tools/test-utils/src/s3-global-setup.ts"] },
});
