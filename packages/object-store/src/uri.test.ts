import { describe, expect, it } from "vitest";
import { formatStoreUri, parseStoreUri } from "./uri.js";

describe("parseStoreUri", () => {
  it.each([
    ["s3://bucket", { scheme: "s3", bucket: "bucket", prefix: "" }],
    ["s3://bucket/", { scheme: "s3", bucket: "bucket", prefix: "" }],
    ["s3://my.bucket-1/a/b/", { scheme: "s3", bucket: "my.bucket-1", prefix: "a/b" }],
    ["gs://my_bucket/run/ckpt", { scheme: "gs", bucket: "my_bucket", prefix: "run/ckpt" }],
    ["file:///tmp/archive", { scheme: "file", bucket: "/tmp/archive", prefix: "" }],
    ["file:///tmp/archive/", { scheme: "file", bucket: "/tmp/archive", prefix: "" }],
    ["file://localhost/srv/x", { scheme: "file", bucket: "/srv/x", prefix: "" }],
    ["file:///tmp/my%20dir", { scheme: "file", bucket: "/tmp/my dir", prefix: "" }],
    ["memory://tests/p", { scheme: "memory", bucket: "tests", prefix: "p" }],
    ["S3://bucket/p", { scheme: "s3", bucket: "bucket", prefix: "p" }],
  ])("parses %s", (uri, expected) => {
    expect(parseStoreUri(uri)).toEqual(expected);
  });

  it.each([
    ["", "empty"],
    [" s3://bucket", "whitespace"],
    ["bucket/prefix", "no scheme"],
    ["/abs/path", "bare path"],
    ["http://host/b", "unsupported scheme"],
    ["s3://", "empty bucket"],
    ["s3:///prefix", "empty bucket"],
    ["s3://Bucket_Upper/p", "bad bucket"],
    ["s3://ab", "too short bucket"],
    ["s3://key:secret@bucket/p", "credentials"],
    ["s3://bucket/a/../b", "dot-dot"],
    ["s3://bucket/a/./b", "dot"],
    ["s3://bucket/a//b", "empty segment"],
    ["s3://bucket/a?versionId=1", "query"],
    ["s3://bucket/a#frag", "fragment"],
    ["gs://bucket/a\\b", "backslash"],
    ["file://relative/path", "relative file path"],
    ["file:///", "filesystem root"],
    ["file:///tmp/../etc", "dot-dot in file path"],
    ["file:///tmp//x", "empty segment in file path"],
    ["file:///tmp/%zz", "bad escape"],
    ["file:///tmp/%00x", "NUL"],
    ["memory://", "empty memory name"],
  ])("refuses %j (%s) with STORE_BAD_URI", (uri) => {
    expect(() => parseStoreUri(uri)).toThrow(
      expect.objectContaining({ code: "STORE_BAD_URI", kind: "input" }),
    );
  });

  it("never echoes credentials in its message", () => {
    try {
      parseStoreUri("s3://AKIAIOSFODNN7EXAMPLE:verysecret@bucket/p");
      expect.unreachable();
    } catch (error) {
      expect(String((error as Error).message)).not.toMatch(/verysecret|AKIAIOSFODNN7EXAMPLE/);
      expect((error as Error).message).toContain("credentials file");
    }
  });

  it("formats a canonical URI that parses back to the same address", () => {
    for (const uri of ["s3://bucket/a/b", "gs://bucket", "file:///tmp/a%20b/c%23d", "memory://m/p"]) {
      const parsed = parseStoreUri(uri);
      expect(parseStoreUri(formatStoreUri(parsed))).toEqual(parsed);
    }
    expect(formatStoreUri(parseStoreUri("s3://bucket/a/b/"))).toBe("s3://bucket/a/b");
  });
});
