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

  it("tells a missing bucket from a missing object, and names the endpoint of a missing bucket or a refused connection", () => {
    const bucket = toStoreError(sdkError("NoSuchBucket", 404), "get", "s3://typo/k", "http://127.0.0.1:7480");
    expect(bucket.code).toBe("STORE_NO_SUCH_BUCKET");
    expect(bucket.message).toContain("the bucket does not exist at http://127.0.0.1:7480");
    expect(toStoreError(sdkError("NoSuchKey", 404), "get", "s3://b/k").code).toBe("STORE_NOT_FOUND");
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const unreachable = toStoreError(refused, "get", "s3://b/k", "http://127.0.0.1:9");
    expect(unreachable.message).toContain("ECONNREFUSED");
    expect(unreachable.message).toContain("http://127.0.0.1:9");
    expect(unreachable.message).toMatch(/endpoint_url/);
  });
});
