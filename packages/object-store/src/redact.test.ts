import { describe, expect, it } from "vitest";
import { ObjectStoreError } from "./errors.js";
import { redact } from "./redact.js";

describe("redact", () => {
  it("removes user-info, key ids, signatures, credential fields and authorization headers", () => {
    expect(redact("s3://AKID:s3cr3t@bucket/x")).toBe("s3://[redacted]@bucket/x");
    expect(redact("key AKIAIOSFODNN7EXAMPLE used")).toBe("key [redacted] used");
    expect(redact("https://h/o?X-Amz-Credential=abc%2F&X-Amz-Signature=deadbeef&x=1")).toBe(
      "https://h/o?X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&x=1",
    );
    expect(redact('{"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG"}')).toBe(
      '{"aws_secret_access_key": "[redacted]"}',
    );
    expect(redact("Authorization: AWS4-HMAC-SHA256 Credential=x")).toBe("Authorization: [redacted]");
  });

  it("removes literal secrets the caller knows, ignoring very short ones", () => {
    expect(redact("denied for hunter2hunter2", { secrets: ["hunter2hunter2", undefined, "ab"] })).toBe(
      "denied for [redacted]",
    );
    expect(redact("about abc", { secrets: ["ab"] })).toBe("about abc");
  });

  it("is applied to every ObjectStoreError message and subject", () => {
    const error = new ObjectStoreError("STORE_BAD_URI", "bad s3://id:secret@b/p", {
      kind: "failed",
      subject: "s3://id:secret@b",
    });
    expect(error.message).not.toContain("secret");
    expect(error.subject).not.toContain("secret");
  });
});
