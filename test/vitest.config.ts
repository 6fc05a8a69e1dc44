import { packageTests } from "../tools/build/vitest.shared.ts";

export default packageTests(import.meta.dirname, {
  include: ["**/*.test.ts"],
  realS3: true,
  testTimeout: 120_000,
});
