import { describe, expect, it } from "vitest";
import { toStoreError } from "./errors.js";

const sdkError = (name: string, status?: number) =>
  Object.assign(new Error(name), {
    name,
    ...(status === undefined ? {} : { $metadata: { httpStatusCode: status } }),
  });

describe("toStoreError", () => {
  it("tells an empty credential chain from a refused request", () => {
    const missing = toStoreError(sdkError("CredentialsProviderError"), "head", "s3://b/k");
    expect(missing.code).toBe("STORE_NO_CREDENTIALS");
    expect(missing.message).toMatch(/no credentials found.*credentials file.*AWS_ACCESS_KEY_ID/);
    const refused = toStoreError(sdkError("AccessDenied", 403), "head", "s3://b/k");
    expect(refused.code).toBe("STORE_ACCESS_DENIED");
    expect(toStoreError(sdkError("InvalidAccessKeyId", 403), "put", "s3://b/k").code).toBe(
      "STORE_ACCESS_DENIED",
    );
  });
});
