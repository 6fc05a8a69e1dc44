import { describe, expect, it } from "vitest";
import { CkptError, CkptSubjectError, isAbort, kindOf, messageOf, truncateForMessage } from "../src/index.js";

class SampleError extends CkptError<"SAMPLE_BAD" | "SAMPLE_WORSE"> {
  override readonly name = "SampleError";
}

describe("CkptError", () => {
  it("keeps the code, the stated kind, the message and the cause", () => {
    const cause = new Error("root");
    const error = new SampleError("SAMPLE_BAD", "it is bad", { kind: "refused", cause });
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({
      name: "SampleError",
      code: "SAMPLE_BAD",
      kind: "refused",
      message: "it is bad",
    });
    expect(error.cause).toBe(cause);
    expect("cause" in new SampleError("SAMPLE_WORSE", "m", { kind: "input" })).toBe(false);
  });
});

describe("CkptSubjectError", () => {
  class StoreSample extends CkptSubjectError<"SAMPLE_GONE"> {}

  it("keeps the subject it is about, and nothing when none is named", () => {
    expect(new StoreSample("SAMPLE_GONE", "m", { kind: "failed", subject: "s3://b/k" })).toMatchObject({
      code: "SAMPLE_GONE",
      kind: "failed",
      subject: "s3://b/k",
    });
    expect(new StoreSample("SAMPLE_GONE", "m", { kind: "failed" }).subject).toBeUndefined();
  });
});

describe("kindOf", () => {
  it("reads a valid kind and calls everything else failed", () => {
    expect(kindOf(new SampleError("SAMPLE_BAD", "m", { kind: "transient" }))).toBe("transient");
    expect(kindOf({ kind: "input" })).toBe("input");
    expect(kindOf({ kind: "fatal" })).toBe("failed");
    expect(kindOf(new Error("plain"))).toBe("failed");
    expect(kindOf(undefined)).toBe("failed");
    expect(kindOf("text")).toBe("failed");
  });
});

describe("messageOf", () => {
  it("is the message of an Error and the string of anything else", () => {
    expect(messageOf(new Error("boom"))).toBe("boom");
    expect(messageOf(42)).toBe("42");
  });
});

describe("truncateForMessage", () => {
  it("quotes and cuts at the limit, making control characters visible", () => {
    expect(truncateForMessage("a\nb")).toBe('"a\\nb"');
    expect(truncateForMessage("x".repeat(41))).toBe(`"${"x".repeat(40)}…"`);
    expect(truncateForMessage("x".repeat(40))).toBe(`"${"x".repeat(40)}"`);
    expect(truncateForMessage("abcdef", 3)).toBe('"abc…"');
  });
});

describe("isAbort", () => {
  it("tells a caller's abort, whichever package noticed it, from a failure", () => {
    expect(isAbort(new SampleError("SAMPLE_BAD", "m", { kind: "failed" }))).toBe(false);
    expect(isAbort(Object.assign(new Error("m"), { code: "STORE_ABORTED" }))).toBe(true);
    expect(isAbort(Object.assign(new Error("m"), { code: "HASH_ABORTED" }))).toBe(true);
    expect(isAbort(new DOMException("stopped", "AbortError"))).toBe(true);
    expect(isAbort(undefined)).toBe(false);
    expect(isAbort("STORE_ABORTED")).toBe(false);
  });
});
