import { describe, expect, it } from "vitest";
import { createMemoryStore, ObjectStoreError } from "../src/index.js";
import { toStoreError } from "../src/s3/errors.js";

// Before @ckpt/errors, ObjectStoreError defaulted a missing kind to `failed`; these sites relied on it.
describe("ObjectStoreError kinds", () => {
  it("untranslatable, missing, denied and aborted requests stay failed (exit 1); throttling stays transient", () => {
    const kind = (error: unknown) => toStoreError(error, "get", "s3://bucket/key").kind;
    expect(kind(new Error("odd"))).toBe("failed");
    expect(kind({ name: "NoSuchKey", $metadata: { httpStatusCode: 404 } })).toBe("failed");
    expect(kind({ name: "AccessDenied", $metadata: { httpStatusCode: 403 } })).toBe("failed");
    expect(kind({ name: "AbortError" })).toBe("failed");
    expect(kind({ name: "SlowDown", $metadata: { httpStatusCode: 503 } })).toBe("transient");
  });

  it("a missing object in the memory store is a failed STORE_NOT_FOUND", async () => {
    const error = await createMemoryStore()
      .get("absent")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ObjectStoreError);
    expect(error).toMatchObject({ code: "STORE_NOT_FOUND", kind: "failed" });
  });
});
