import { mergeConfig } from "vitest/config";
import { packageTests } from "../../tools/build/vitest.shared.ts";

// The S3 tests run against a real Ceph RGW: test/global-setup.ts uses the server named by the
// environment (AWS_ENDPOINT_URL, ..., CKPT_TEST_S3_BUCKET) or starts a private one.
export default mergeConfig(packageTests(import.meta.dirname), {
  test: { globalSetup: ["test/global-setup.ts"] },
});
