import { describe, expect, it } from "vitest";
import { buildGcsConditionalPut } from "../src/s3/gcs-xml.js";
import { AWS4, GOOG4, signingTimestamp, signRequest, uriEncode } from "../src/s3/sigv4.js";

// Vectors derived by hand with openssl (sha256sum + `openssl dgst -sha256 -mac HMAC`), following
// the SigV4 algorithm step by step with the GOOG4 names:
//   kDate = HMAC("GOOG4" + secret, "20260102"); kRegion = HMAC(kDate, "auto");
//   kService = HMAC(kRegion, "storage"); kSigning = HMAC(kService, "goog4_request");
//   signature = hex(HMAC(kSigning, stringToSign)).
const HELLO_SHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
const GOOG4_SECRET = "bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ";
const GOOG4_CANONICAL_REQUEST = [
  "PUT",
  "/ckpt-bucket/runs/decl.json",
  "",
  "host:storage.googleapis.com",
  `x-goog-content-sha256:${HELLO_SHA256}`,
  "x-goog-date:20260102T030405Z",
  "x-goog-if-generation-match:0",
  "",
  "host;x-goog-content-sha256;x-goog-date;x-goog-if-generation-match",
  HELLO_SHA256,
].join("\n");
const GOOG4_STRING_TO_SIGN = [
  "GOOG4-HMAC-SHA256",
  "20260102T030405Z",
  "20260102/auto/storage/goog4_request",
  "49abce7ca346b85acd33460becad785194f6a9ec4afe03d0878a6fdb5938f528",
].join("\n");
const GOOG4_SIGNATURE = "b86983974d5e9b994ef9d7816b9bce1c74474c50317d2499effb80f535738936";

describe("GOOG4-HMAC-SHA256 signer", () => {
  it("matches the hand-derived vector: canonical request, string to sign, signature", () => {
    const out = signRequest(
      GOOG4,
      {
        method: "PUT",
        path: "/ckpt-bucket/runs/decl.json",
        headers: {
          Host: "storage.googleapis.com",
          "X-Goog-Date": "20260102T030405Z",
          "x-goog-content-sha256": HELLO_SHA256,
          "x-goog-if-generation-match": "0",
        },
        payloadHash: HELLO_SHA256,
      },
      {
        accessKeyId: "GOOG1EXAMPLE",
        secretAccessKey: GOOG4_SECRET,
        region: "auto",
        service: "storage",
        timestamp: "20260102T030405Z",
      },
    );
    expect(out.canonicalRequest).toBe(GOOG4_CANONICAL_REQUEST);
    expect(out.stringToSign).toBe(GOOG4_STRING_TO_SIGN);
    expect(out.signature).toBe(GOOG4_SIGNATURE);
    expect(out.authorization).toBe(
      "GOOG4-HMAC-SHA256 Credential=GOOG1EXAMPLE/20260102/auto/storage/goog4_request, " +
        `SignedHeaders=host;x-goog-content-sha256;x-goog-date;x-goog-if-generation-match, Signature=${GOOG4_SIGNATURE}`,
    );
  });

  it("with the AWS4 names it reproduces AWS's published get-vanilla vector", () => {
    const out = signRequest(
      AWS4,
      {
        method: "GET",
        path: "/",
        headers: { host: "example.amazonaws.com", "x-amz-date": "20150830T123600Z" },
        payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      },
      {
        accessKeyId: "AKIDEXAMPLE",
        secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        region: "us-east-1",
        service: "service",
        timestamp: "20150830T123600Z",
      },
    );
    expect(out.signature).toBe("5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  });

  it("the conditional PUT builder signs the same request the vector describes", () => {
    const { url, headers } = buildGcsConditionalPut({
      endpoint: "https://storage.googleapis.com",
      bucket: "ckpt-bucket",
      key: "runs/decl.json",
      body: Buffer.from("hello"),
      metadata: {},
      credentials: { accessKeyId: "GOOG1EXAMPLE", secretAccessKey: GOOG4_SECRET },
      region: "auto",
      now: new Date("2026-01-02T03:04:05.678Z"),
    });
    expect(url.href).toBe("https://storage.googleapis.com/ckpt-bucket/runs/decl.json");
    expect(headers.authorization).toContain(`Signature=${GOOG4_SIGNATURE}`);
    expect(headers["content-length"]).toBe("5");
  });

  it("encodes keys as SigV4 requires and refuses a date header that differs from the timestamp", () => {
    expect(uriEncode("a b/ü+*~.json", true)).toBe("a%20b/%C3%BC%2B%2A~.json");
    expect(uriEncode("a/b", false)).toBe("a%2Fb");
    expect(signingTimestamp(new Date("2026-01-02T03:04:05.678Z"))).toBe("20260102T030405Z");
    expect(() =>
      signRequest(
        GOOG4,
        {
          method: "PUT",
          path: "/",
          headers: { host: "h", "x-goog-date": "20260102T030406Z" },
          payloadHash: "x",
        },
        {
          accessKeyId: "a",
          secretAccessKey: "s",
          region: "auto",
          service: "storage",
          timestamp: "20260102T030405Z",
        },
      ),
    ).toThrow(/x-goog-date/);
  });
});
