import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Readable } from "node:stream";
import { buffer } from "node:stream/consumers";
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { testdir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { makeS3Client, resolveS3Endpoint } from "../src/s3/client.js";
import { createS3Store } from "../src/s3/store.js";
import { GOOG4, signRequest } from "../src/s3/sigv4.js";
import { startRecordingServer, sendXmlError } from "./helpers/recording-server.js";
import { createTestBucket, rawClient, s3TestEnv, testCredentials } from "@ckpt/test-utils";

const env = s3TestEnv();
const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");
const noWait = { retries: 3, sleep: async () => {} };
const MiB = 1024 * 1024;

let bucket = "";

function store(prefix = `t-${randomBytes(3).toString("hex")}`) {
  return createS3Store({ bucket, prefix, credentials: testCredentials(env), retry: noWait, env: {} });
}

describe("S3 backend against Ceph RGW", { tags: ["s3"] }, () => {
  let cleanup: () => Promise<void> = async () => {};
  beforeAll(async () => {
    ({ bucket, cleanup } = await createTestBucket(env, "behaviour"));
  });
  afterAll(() => cleanup());

  it("stores sha256 and user metadata as x-amz-meta-* and reads them back on HEAD", async () => {
    const s = store("meta");
    const body = Buffer.from("hello world, 0123456789");
    const put = await s.put("a/b.txt", body, { sha256: sha(body), metadata: { step: "100" } });
    expect(put).toMatchObject({ key: "a/b.txt", size: body.length, sha256: sha(body) });
    const raw = await (await rawClient(env)).send(
      new HeadObjectCommand({ Bucket: bucket, Key: "meta/a/b.txt" }),
    );
    expect(raw.Metadata).toEqual({ sha256: sha(body), step: "100" });
    const head = await s.head("a/b.txt");
    expect(head).toMatchObject({ size: body.length, sha256: sha(body) });
    expect(head?.metadata).toEqual({ step: "100" });
    expect(await s.head("a/missing.txt")).toBeUndefined();
  });

  it("gets an exclusive-end byte range as a Node Readable", async () => {
    const s = store();
    await s.put("r.txt", Buffer.from("hello world, 0123456789"));
    const stream = await s.get("r.txt", { range: { start: 6, end: 11 } });
    expect(stream).toBeInstanceOf(Readable);
    expect((await buffer(stream)).toString()).toBe("world");
    expect((await buffer(await s.get("r.txt", { range: { start: 13 } }))).toString()).toBe("0123456789");
    await expect(s.get("nope.txt")).rejects.toMatchObject({ code: "STORE_NOT_FOUND" });
  });

  it("conditional create: 412 on the second PUT, then HEAD confirms and returns the first object", async () => {
    const s = store();
    const first = Buffer.from("first");
    const created = await s.createIfAbsent("decl.json", first, { sha256: sha(first) });
    expect(created.status).toBe("created");
    const again = await s.createIfAbsent("decl.json", Buffer.from("second"), {
      sha256: sha(Buffer.from("second")),
    });
    expect(again).toMatchObject({ status: "exists", info: { size: 5, sha256: sha(first) } });
    expect((await buffer(await s.get("decl.json"))).toString()).toBe("first");
  });

  it("measured: If-None-Match on CompleteMultipartUpload is NOT enforced (the object is overwritten)", async () => {
    const client = await rawClient(env);
    const Key = `mpu-${randomBytes(3).toString("hex")}`;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: "original" }));
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key }));
    const part = await client.send(
      new UploadPartCommand({ Bucket: bucket, Key, UploadId, PartNumber: 1, Body: Buffer.from("replaced") }),
    );
    const done = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key,
        UploadId,
        IfNoneMatch: "*",
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    expect(done.$metadata.httpStatusCode).toBe(200);
    const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key }));
    expect(await got.Body?.transformToString()).toBe("replaced");
  });

  it("multipart put from a file path: parts from positioned reads, bytes and metadata intact", async () => {
    const dir = await testdir();
    const data = randomBytes(12 * MiB + 123);
    const path = join(dir, "model.pt");
    await writeFile(path, data);
    const s = store();
    const progress: number[] = [];
    const info = await s.put(
      "model.pt",
      { path },
      {
        sha256: sha(data),
        multipartThreshold: 5 * MiB,
        partSize: 5 * MiB,
        concurrency: 2,
        onProgress: (n) => progress.push(n),
      },
    );
    expect(info).toMatchObject({ size: data.length, sha256: sha(data) });
    expect(progress.at(-1)).toBe(data.length);
    expect(progress).toHaveLength(3);
    const head = await s.head("model.pt");
    expect(head).toMatchObject({ size: data.length, sha256: sha(data) });
    expect(head?.etag).toMatch(/-3"$/); // a multipart ETag names its part count
    expect(sha(await buffer(await s.get("model.pt")))).toBe(sha(data));
  });

  it("multipart put from a stream body", async () => {
    const data = randomBytes(11 * MiB);
    const chunks = Array.from({ length: 11 }, (_, i) => data.subarray(i * MiB, (i + 1) * MiB));
    const s = store();
    await s.put(
      "stream.bin",
      { stream: Readable.from(chunks), size: data.length },
      { multipartThreshold: 5 * MiB },
    );
    expect(sha(await buffer(await s.get("stream.bin")))).toBe(sha(data));
  });

  it("refuses a body whose bytes contradict the declared sha256 (single and multipart), storing nothing", async () => {
    const s = store();
    const small = Buffer.from("small");
    await expect(s.put("d1", small, { sha256: "2".repeat(64) })).rejects.toMatchObject({
      code: "STORE_INTEGRITY",
    });
    const big = randomBytes(6 * MiB);
    await expect(
      s.put("d2", big, { sha256: "3".repeat(64), multipartThreshold: 5 * MiB }),
    ).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
    expect(await s.head("d1")).toBeUndefined();
    expect(await s.head("d2")).toBeUndefined();
  });

  it("a file rewritten after it was hashed is refused (single and multipart), storing nothing", async () => {
    const dir = await testdir();
    const hashed = randomBytes(7 * MiB);
    const rewritten = Buffer.from(hashed);
    rewritten[rewritten.length - 1]! ^= 1; // only the very last byte differs
    await writeFile(join(dir, "f"), rewritten);
    const s = store();
    for (const [key, threshold] of [
      ["single", undefined],
      ["multi", 5 * MiB],
    ] as const) {
      await expect(
        s.put(
          key,
          { path: join(dir, "f") },
          {
            sha256: sha(hashed),
            ...(threshold === undefined ? {} : { multipartThreshold: threshold, partSize: 5 * MiB }),
          },
        ),
      ).rejects.toMatchObject({ code: "STORE_INTEGRITY", kind: "input" });
      expect(await s.head(key)).toBeUndefined();
    }
  });

  it("concurrent multipart uploads share one part budget and all complete intact", async () => {
    const dir = await testdir();
    const s = createS3Store({
      bucket,
      prefix: `budget-${randomBytes(3).toString("hex")}`,
      credentials: testCredentials(env),
      retry: noWait,
      env: {},
      // One 5 MiB part in memory at a time, for four uploads of four parts in flight each.
      partBufferBytes: 5 * MiB,
    });
    const files = await Promise.all(
      [0, 1, 2, 3].map(async (i) => {
        const data = randomBytes(11 * MiB + i);
        await writeFile(join(dir, `f${i}`), data);
        return { key: `f${i}`, data };
      }),
    );
    await Promise.all(
      files.map(({ key, data }) =>
        s.put(
          key,
          { path: join(dir, key) },
          {
            sha256: sha(data),
            multipartThreshold: 5 * MiB,
            partSize: 5 * MiB,
            concurrency: 4,
          },
        ),
      ),
    );
    for (const { key, data } of files) {
      expect((await s.head(key))?.sha256).toBe(sha(data));
      expect(sha(await buffer(await s.get(key)))).toBe(sha(data));
    }
  });

  it("refuses a stream that is shorter than its declared size", async () => {
    const s = store();
    await expect(
      s.put("short.bin", { stream: Readable.from([Buffer.from("abc")]), size: 10 }),
    ).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
    expect(await s.head("short.bin")).toBeUndefined();
  });

  it("measured: stream bodies need WHEN_REQUIRED checksums (the SDK default gets 411 from Ceph pacific)", async () => {
    const resolved = resolveS3Endpoint({ credentials: testCredentials(env), env: {} });
    expect(resolved.dialect).toBe("s3-compatible");
    const ours = await makeS3Client(resolved, testCredentials(env));
    const body = () => Readable.from([Buffer.from("streamed body")]);
    const ok = await ours.send(
      new PutObjectCommand({ Bucket: bucket, Key: "stream-ok", Body: body(), ContentLength: 13 }),
    );
    expect(ok.$metadata.httpStatusCode).toBe(200);
    const sdkDefault = new S3Client({
      endpoint: env.endpoint,
      region: env.region,
      forcePathStyle: true,
      credentials: { accessKeyId: env.accessKeyId, secretAccessKey: env.secretAccessKey },
      logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
    });
    await expect(
      sdkDefault.send(
        new PutObjectCommand({ Bucket: bucket, Key: "stream-default", Body: body(), ContentLength: 13 }),
      ),
    ).rejects.toMatchObject({ $metadata: { httpStatusCode: 411 } });
  });

  it("a file body below the threshold is streamed (not buffered) and arrives intact", async () => {
    const dir = await testdir();
    const data = randomBytes(300_000);
    await writeFile(join(dir, "f"), data);
    const s = store();
    await s.put("f", { path: join(dir, "f") }, { sha256: sha(data) });
    expect(sha(await buffer(await s.get("f")))).toBe(sha(data));
  });
});

const fakeCredentials = {
  aws_access_key_id: "GOOG1EXAMPLEKEYID",
  aws_secret_access_key: "fake-secret-never-in-a-message-0123456789",
  region_name: "us-east-1",
};

/** An S3 store on a loopback fake with fast retries; a test overrides only what it varies. */
function storeOn(server: { url: string }, overrides: Partial<Parameters<typeof createS3Store>[0]> = {}) {
  return createS3Store({
    bucket: "b",
    prefix: "",
    credentials: fakeCredentials,
    endpoint: server.url,
    retry: noWait,
    env: {},
    ...overrides,
  });
}

async function fakeS3(respond: Parameters<typeof startRecordingServer>[0]) {
  const server = await startRecordingServer(respond);
  onTestFinished(() => server.close());
  return server;
}

describe("S3 backend against a loopback fake (answers no real server gives on demand)", () => {
  it("a 412 with no object behind it is STORE_PRECONDITION_UNCONFIRMED, not 'exists'", async () => {
    const server = await fakeS3((req, res) => {
      if (req.method === "PUT") return sendXmlError(res, 412, "PreconditionFailed");
      res.writeHead(404).end();
    });
    const s = storeOn(server, { prefix: "p" });
    await expect(s.createIfAbsent("decl.json", Buffer.from("{}"))).rejects.toMatchObject({
      name: "ObjectStoreError",
      code: "STORE_PRECONDITION_UNCONFIRMED",
      subject: "s3://b/p/decl.json",
    });
    expect(server.requests.map((r) => `${r.method} ${r.url.split("?")[0]}`)).toEqual([
      "PUT /b/p/decl.json",
      "HEAD /b/p/decl.json",
    ]);
    expect(server.requests[0]?.headers["if-none-match"]).toBe("*");
  });

  it("a connection reset mid-body reaches the reader as a transient ObjectStoreError, not a bare errno", async () => {
    const server = await fakeS3((_req, res) => {
      res.writeHead(200, { "content-length": "1048576", etag: '"abc"' });
      res.write(Buffer.alloc(4096, 7));
      setTimeout(() => res.socket?.resetAndDestroy(), 20);
    });
    const s = storeOn(server);
    const body = await s.get("model.pt");
    const drained = (async () => {
      for await (const _chunk of body) {
        // read until the connection breaks
      }
    })();
    await expect(drained).rejects.toMatchObject({
      name: "ObjectStoreError",
      code: "STORE_TRANSIENT",
      kind: "transient",
      subject: "s3://b/model.pt",
      message: expect.stringContaining("after 4096 bytes"),
    });
  });

  it("a file whose bytes contradict its digest is streamed but for its last chunk, and the request is cut", async () => {
    // One read pass feeds the request and the digest: the body goes out as it is read, and only
    // the final chunk waits for the digest. A mismatch then cuts the request short of its
    // Content-Length, so no server can complete it.
    const received: Array<{ bytes: number; complete: boolean }> = [];
    const server = createServer((req, res) => {
      const seen = { bytes: 0, complete: false };
      received.push(seen);
      req.on("data", (chunk: Buffer) => {
        seen.bytes += chunk.byteLength;
      });
      req.on("end", () => {
        seen.complete = true;
        res.writeHead(200, { etag: '"x"' }).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onTestFinished(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    );
    const dir = await testdir();
    const data = randomBytes(3 * MiB);
    await writeFile(join(dir, "f"), data);
    const s = storeOn({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    await expect(s.put("f", { path: join(dir, "f") }, { sha256: "0".repeat(64) })).rejects.toMatchObject({
      code: "STORE_INTEGRITY",
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(received).toHaveLength(1); // a digest mismatch is not retried
    expect(received[0]!.complete).toBe(false);
    expect(received[0]!.bytes).toBeLessThan(data.length);
    expect(received[0]!.bytes).toBeGreaterThan(data.length - 1024 * 1024);
    // The same file with its true digest goes through whole.
    await s.put("f", { path: join(dir, "f") }, { sha256: sha(data) });
    expect(received.at(-1)).toEqual({ bytes: data.length, complete: true });
  });

  it("a 501 to If-None-Match fails closed with STORE_CONDITIONAL_UNSUPPORTED", async () => {
    const server = await fakeS3((_req, res) => sendXmlError(res, 501, "NotImplemented"));
    const s = storeOn(server);
    await expect(s.createIfAbsent("x", Buffer.from("1"))).rejects.toMatchObject({
      code: "STORE_CONDITIONAL_UNSUPPORTED",
      kind: "refused",
    });
    expect(server.requests).toHaveLength(1);
  });

  it("retries 503 and SlowDown, then succeeds", async () => {
    let calls = 0;
    const server = await fakeS3((_req, res) => {
      calls++;
      if (calls === 1) return sendXmlError(res, 503, "ServiceUnavailable");
      if (calls === 2) return sendXmlError(res, 503, "SlowDown");
      res.writeHead(200, { etag: '"abc"' }).end();
    });
    const s = storeOn(server);
    const info = await s.put("k", Buffer.from("data"));
    expect(info.etag).toBe('"abc"');
    expect(server.requests.map((r) => r.method)).toEqual(["PUT", "PUT", "PUT"]);
  });

  it("retries a connection reset", async () => {
    let calls = 0;
    const server = await fakeS3((_req, res, raw) => {
      calls++;
      if (calls === 1) return void raw.socket.destroy();
      res.writeHead(200).end();
    });
    const s = storeOn(server);
    await s.put("k", Buffer.from("data"));
    expect(calls).toBe(2);
  });

  it("does not retry 403; the message names the object and no secret", async () => {
    const server = await fakeS3((_req, res) => sendXmlError(res, 403, "SignatureDoesNotMatch"));
    const s = storeOn(server, { prefix: "p" });
    const error = await s.head("k").catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "STORE_ACCESS_DENIED", subject: "s3://b/p/k" });
    expect(String((error as Error).message)).toContain("s3://b/p/k");
    expect(String((error as Error).message)).not.toContain(fakeCredentials.aws_secret_access_key);
    expect(server.requests).toHaveLength(1);
  });

  it("times out a silent server per attempt (STORE_TIMEOUT) and honours an abort signal (STORE_ABORTED)", async () => {
    const server = await fakeS3(() => {});
    const s = storeOn(server, { retry: { retries: 1, sleep: async () => {} }, timeoutMs: 150 });
    await expect(s.head("k")).rejects.toMatchObject({ code: "STORE_TIMEOUT", kind: "transient" });
    expect(server.requests).toHaveLength(2);
    const controller = new AbortController();
    const pending = s.head("k", { signal: controller.signal, timeoutMs: 60_000 });
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ code: "STORE_ABORTED" });
  });

  it("a failed streaming upload prints nothing (the SDK would console.warn with its default logger)", async () => {
    const dir = await testdir();
    await writeFile(join(dir, "f"), "streamed");
    const server = await fakeS3((_req, res) => sendXmlError(res, 400, "InvalidRequest"));
    const s = storeOn(server);
    const warn = vi.spyOn(console, "warn");
    onTestFinished(() => warn.mockRestore());
    await expect(s.put("f", { path: join(dir, "f") })).rejects.toMatchObject({
      code: "STORE_REQUEST_FAILED",
    });
    expect(warn).not.toHaveBeenCalled();
  });

  it("GCS behind the S3 API: the conditional create is a GOOG4-signed XML PUT with x-goog-if-generation-match: 0", async () => {
    const body = Buffer.from('{"protocol":"x"}');
    let stored = false;
    const server = await fakeS3((req, res) => {
      if (req.method === "PUT") {
        if (stored) return sendXmlError(res, 412, "PreconditionFailed");
        stored = true;
        return void res.writeHead(200, { etag: '"e1"', "x-goog-generation": "1700000000000001" }).end();
      }
      res
        .writeHead(200, {
          "content-length": String(body.length),
          "x-amz-meta-sha256": sha(body),
          etag: '"e1"',
        })
        .end();
    });
    const now = new Date("2026-01-02T03:04:05Z");
    const s = createS3Store({
      bucket: "ckpt-bucket",
      prefix: "runs/a b",
      credentials: fakeCredentials,
      endpoint: server.url,
      dialect: "gcs",
      region: "auto",
      retry: noWait,
      env: {},
      now: () => now,
    });
    const first = await s.createIfAbsent("iter_1/.posttrain-archive.json", body, {
      sha256: sha(body),
      contentType: "application/json",
    });
    expect(first).toMatchObject({ status: "created", info: { etag: '"e1"', sha256: sha(body) } });
    const put = server.requests[0]!;
    expect(put.method).toBe("PUT");
    expect(put.url).toBe("/ckpt-bucket/runs/a%20b/iter_1/.posttrain-archive.json");
    expect(put.body.equals(body)).toBe(true);
    expect(put.headers["x-goog-if-generation-match"]).toBe("0");
    expect(put.headers["x-goog-meta-sha256"]).toBe(sha(body));
    expect(put.headers["x-goog-date"]).toBe("20260102T030405Z");
    expect(put.headers["x-goog-content-sha256"]).toBe(sha(body));
    expect(put.headers["if-none-match"]).toBeUndefined();
    expect(Object.keys(put.headers).filter((h) => h.startsWith("x-amz-"))).toEqual([]);
    const authorization = String(put.headers.authorization);
    expect(authorization).toMatch(
      /^GOOG4-HMAC-SHA256 Credential=GOOG1EXAMPLEKEYID\/20260102\/auto\/storage\/goog4_request, SignedHeaders=content-type;host;x-goog-content-sha256;x-goog-date;x-goog-if-generation-match;x-goog-meta-sha256, Signature=[0-9a-f]{64}$/,
    );
    // The server side of the check: recompute the signature from what arrived.
    const signedNames = /SignedHeaders=([^,]+)/.exec(authorization)![1]!.split(";");
    const expected = signRequest(
      GOOG4,
      {
        method: "PUT",
        path: put.url,
        headers: Object.fromEntries(signedNames.map((n) => [n, String(put.headers[n])])),
        payloadHash: sha(body),
      },
      {
        accessKeyId: fakeCredentials.aws_access_key_id,
        secretAccessKey: fakeCredentials.aws_secret_access_key,
        region: "auto",
        service: "storage",
        timestamp: "20260102T030405Z",
      },
    );
    expect(authorization).toBe(expected.authorization);

    const second = await s.createIfAbsent("iter_1/.posttrain-archive.json", Buffer.from("other"));
    expect(second).toMatchObject({ status: "exists", info: { size: body.length, sha256: sha(body) } });
    expect(server.requests.map((r) => r.method)).toEqual(["PUT", "PUT", "HEAD"]);
    // The confirming HEAD is an ordinary AWS4-signed S3 request.
    expect(String(server.requests[2]!.headers.authorization)).toMatch(/^AWS4-HMAC-SHA256 /);
  });

  it("pins the AWS endpoint so the SDK cannot pick AWS_ENDPOINT_URL behind the identity's back", async () => {
    vi.stubEnv("AWS_ENDPOINT_URL", "http://127.0.0.1:1");
    onTestFinished(() => {
      vi.unstubAllEnvs();
    });
    const resolved = resolveS3Endpoint({ region: "eu-west-1", env: {} });
    expect(resolved).toMatchObject({ dialect: "aws", authority: "s3.amazonaws.com" });
    const client = await makeS3Client(resolved, undefined);
    const endpoint = await client.config.endpoint?.();
    expect(endpoint?.hostname).toBe("s3.eu-west-1.amazonaws.com");
  });

  it("detects GCS from the endpoint host storage.googleapis.com", () => {
    expect(resolveS3Endpoint({ endpoint: "https://storage.googleapis.com", env: {} })).toMatchObject({
      dialect: "gcs",
      region: "auto",
      authority: "storage.googleapis.com",
    });
    expect(resolveS3Endpoint({ env: { AWS_ENDPOINT_URL: "http://127.0.0.1:7480" } })).toMatchObject({
      dialect: "s3-compatible",
      endpoint: "http://127.0.0.1:7480",
      authority: "127.0.0.1:7480",
    });
    expect(resolveS3Endpoint({ env: {} })).toMatchObject({ dialect: "aws", authority: "s3.amazonaws.com" });
  });
});
