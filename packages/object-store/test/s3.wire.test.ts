// The plain signed requests an upload is made of (HEAD, PUT of an object or a part): what they
// send, how they address a bucket, and how their answers are read.
import { createHash } from "node:crypto";
import { describe, expect, it, onTestFinished } from "vitest";
import { createS3Store } from "../src/s3/store.js";
import { AWS4, signRequest } from "../src/s3/sigv4.js";
import { isVirtualHostable, signWireRequest, wireAgent } from "../src/s3/wire.js";
import { sendXmlError, startRecordingServer } from "./helpers/recording-server.js";

const keys = { accessKeyId: "AKIDWIRE", secretAccessKey: "wire-secret-never-in-a-message" };
const at = new Date("2026-01-02T03:04:05Z");

function target(endpoint: string, bucket: string, virtualHost: boolean) {
  const url = new URL(endpoint);
  return {
    endpoint: url,
    bucket,
    virtualHost,
    region: "eu-west-1",
    credentials: async () => keys,
    agent: wireAgent(url),
    now: () => at,
  };
}

async function fakeS3(respond: Parameters<typeof startRecordingServer>[0]) {
  const server = await startRecordingServer(respond);
  onTestFinished(() => server.close());
  return server;
}

describe("signed upload requests", () => {
  it("address AWS buckets by host name when they can be, and by path otherwise", () => {
    expect(isVirtualHostable("ckpt-archive")).toBe(true);
    expect(isVirtualHostable("ckpt.archive")).toBe(false);
    expect(isVirtualHostable("Ckpt")).toBe(false);
    const hosted = signWireRequest(
      target("https://s3.eu-west-1.amazonaws.com", "ckpt-archive", true),
      { method: "HEAD", name: "runs/a b/model.pt" },
      keys,
      undefined,
    );
    expect(hosted.url.href).toBe("https://ckpt-archive.s3.eu-west-1.amazonaws.com/runs/a%20b/model.pt");
    expect(hosted.headers.host).toBe("ckpt-archive.s3.eu-west-1.amazonaws.com");
    const pathStyle = signWireRequest(
      target("http://127.0.0.1:7480/base/", "b", false),
      { method: "PUT", name: "k", query: { partNumber: "3", uploadId: "u/1" } },
      keys,
      10,
    );
    expect(pathStyle.url.href).toBe("http://127.0.0.1:7480/base/b/k?partNumber=3&uploadId=u%2F1");
    expect(pathStyle.headers["content-length"]).toBe("10");
  });

  it("sign host, date, payload mode, metadata and a session token, exactly as SigV4 defines", () => {
    const { headers } = signWireRequest(
      target("http://127.0.0.1:7480", "b", false),
      { method: "PUT", name: "k", headers: { "x-amz-meta-sha256": "ab", "Content-Type": "text/plain" } },
      { ...keys, sessionToken: "token" },
      2,
    );
    const expected = signRequest(
      AWS4,
      {
        method: "PUT",
        path: "/b/k",
        headers: {
          host: "127.0.0.1:7480",
          "x-amz-date": "20260102T030405Z",
          "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
          "x-amz-security-token": "token",
          "x-amz-meta-sha256": "ab",
          "content-type": "text/plain",
        },
        payloadHash: "UNSIGNED-PAYLOAD",
      },
      { ...keys, region: "eu-west-1", service: "s3", timestamp: "20260102T030405Z" },
    );
    expect(headers.authorization).toBe(expected.authorization);
    expect(expected.signedHeaders).toBe(
      "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-sha256;x-amz-security-token",
    );
  });

  it("a PUT sends its bytes unsigned with their digest as metadata; a HEAD reads size and metadata back", async () => {
    const body = Buffer.from("twelve bytes");
    const sha = createHash("sha256").update(body).digest("hex");
    const server = await fakeS3((req, res) => {
      if (req.method === "PUT") return void res.writeHead(200, { etag: '"e1"' }).end();
      res.writeHead(200, { "content-length": "12", etag: '"e1"', "x-goog-meta-sha256": sha }).end();
    });
    const store = createS3Store({
      bucket: "b",
      prefix: "p",
      credentials: { aws_access_key_id: "AKIDWIRE", aws_secret_access_key: "wire-secret-never-in-a-message" },
      endpoint: server.url,
      env: {},
    });
    expect(await store.put("k", body, { sha256: sha, metadata: { step: "7" } })).toMatchObject({
      size: 12,
      sha256: sha,
      etag: '"e1"',
    });
    const put = server.requests[0]!;
    expect(put).toMatchObject({ method: "PUT", url: "/b/p/k" });
    expect(put.body.equals(body)).toBe(true);
    expect(put.headers).toMatchObject({
      "content-length": "12",
      "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
      "x-amz-meta-sha256": sha,
      "x-amz-meta-step": "7",
    });
    expect(put.headers.expect).toBeUndefined();
    expect(await store.head("k")).toMatchObject({ key: "k", size: 12, sha256: sha, etag: '"e1"' });
  });

  it("maps answers: 404 on HEAD is absence, an error document names the failure, no secret in it", async () => {
    const server = await fakeS3((req, res) => {
      if (req.method === "HEAD") return void res.writeHead(404).end();
      sendXmlError(res, 403, "InvalidAccessKeyId");
    });
    const store = createS3Store({
      bucket: "b",
      prefix: "",
      credentials: { aws_access_key_id: "AKIDWIRE", aws_secret_access_key: "wire-secret-never-in-a-message" },
      endpoint: server.url,
      env: {},
      retry: { retries: 0 },
    });
    expect(await store.head("missing")).toBeUndefined();
    const error = await store.put("k", Buffer.from("x")).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "STORE_ACCESS_DENIED", subject: "s3://b/k" });
    expect(String((error as Error).message)).toContain("InvalidAccessKeyId");
    expect(String((error as Error).message)).not.toContain("wire-secret");
  });
});
