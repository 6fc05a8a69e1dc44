import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { buffer } from "node:stream/consumers";
import { testdir } from "@ckpt/test-utils";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createGcsStore } from "../src/gcs/store.js";
import { type FakeGcsServer, startFakeGcsServer } from "./helpers/fake-gcs-server.js";

const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");
const MiB = 1024 * 1024;
let fake: FakeGcsServer;

beforeEach(async () => {
  fake = await startFakeGcsServer();
});
afterEach(() => fake.close());

function store(prefix = "runs/r1") {
  return createGcsStore({
    bucket: "ckpt-bucket",
    prefix,
    apiEndpoint: fake.url,
    projectId: "test",
    retry: { retries: 3, sleep: async () => {} },
  });
}

const path = (r: { url: string }) => new URL(r.url, "http://x").pathname;
const query = (r: { url: string }) => new URL(r.url, "http://x").searchParams;

describe("GCS backend (JSON API) against a recording fake", () => {
  it("identity and URI carry no secret", () => {
    const s = store();
    expect(s.uri).toBe("gs://ckpt-bucket/runs/r1");
    expect(s.identity).toEqual({
      scheme: "gs",
      endpoint: new URL(fake.url).host,
      bucket: "ckpt-bucket",
      prefix: "runs/r1",
    });
  });

  it("createIfAbsent sends a multipart upload with ifGenerationMatch=0 and sha256 in metadata", async () => {
    const s = store();
    const body = Buffer.from('{"protocol":"posttrain.artifact-archive.v1"}');
    const created = await s.createIfAbsent("iter_1/.posttrain-archive.json", body, {
      sha256: sha(body),
      contentType: "application/json",
    });
    expect(created).toMatchObject({ status: "created", info: { size: body.length, sha256: sha(body) } });
    expect(fake.requests).toHaveLength(1);
    const upload = fake.requests[0]!;
    expect(upload.method).toBe("POST");
    expect(path(upload)).toBe("/upload/storage/v1/b/ckpt-bucket/o");
    expect(query(upload).get("uploadType")).toBe("multipart");
    expect(query(upload).get("ifGenerationMatch")).toBe("0");
    expect(upload.body.toString("utf8")).toContain(`"sha256":"${sha(body)}"`);
    expect(query(upload).get("name")).toBe("runs/r1/iter_1/.posttrain-archive.json");
    expect(upload.headers.authorization).toBeUndefined();
  });

  it("a second create gets 412, then getMetadata confirms: exists with the first object's info", async () => {
    const s = store();
    const first = Buffer.from("first");
    await s.createIfAbsent("decl.json", first, { sha256: sha(first) });
    const again = await s.createIfAbsent("decl.json", Buffer.from("second"));
    expect(again).toMatchObject({ status: "exists", info: { size: 5, sha256: sha(first) } });
    expect(fake.requests.map((r) => `${r.method} ${path(r)}`)).toEqual([
      "POST /upload/storage/v1/b/ckpt-bucket/o",
      "POST /upload/storage/v1/b/ckpt-bucket/o",
      "GET /storage/v1/b/ckpt-bucket/o/runs%2Fr1%2Fdecl.json",
    ]);
    expect((await buffer(await s.get("decl.json"))).toString()).toBe("first");
  });

  it("a 412 with no object behind it is STORE_PRECONDITION_UNCONFIRMED", async () => {
    fake.lie412(true);
    await expect(store().createIfAbsent("decl.json", Buffer.from("x"))).rejects.toMatchObject({
      code: "STORE_PRECONDITION_UNCONFIRMED",
      subject: "gs://ckpt-bucket/runs/r1/decl.json",
    });
  });

  it("small puts are single multipart uploads without a precondition", async () => {
    const s = store();
    const data = Buffer.from("payload");
    const info = await s.put("a/model.pt", data, { sha256: sha(data) });
    expect(info).toMatchObject({ key: "a/model.pt", size: data.length, sha256: sha(data) });
    expect(query(fake.requests[0]!).get("uploadType")).toBe("multipart");
    expect(query(fake.requests[0]!).get("ifGenerationMatch")).toBeNull();
  });

  it("large puts use a resumable upload in chunks; bytes and sha256 metadata arrive intact", async () => {
    const dir = await testdir();
    const data = randomBytes(3 * MiB + 77);
    await writeFile(join(dir, "model.pt"), data);
    const s = store();
    const progress: number[] = [];
    const info = await s.put(
      "model.pt",
      { path: join(dir, "model.pt") },
      {
        sha256: sha(data),
        multipartThreshold: MiB,
        partSize: MiB,
        onProgress: (n) => progress.push(n),
      },
    );
    expect(info).toMatchObject({ size: data.length, sha256: sha(data) });
    expect(progress.at(-1)).toBe(data.length);
    const start = fake.requests[0]!;
    expect(start.method).toBe("POST");
    expect(query(start).get("uploadType")).toBe("resumable");
    expect(start.body.toString()).toContain(`"sha256":"${sha(data)}"`);
    const chunks = fake.requests.filter((r) => r.method === "PUT");
    expect(chunks.length).toBe(4);
    expect(chunks.map((r) => r.headers["content-range"])).toEqual([
      "bytes 0-1048575/*",
      "bytes 1048576-2097151/*",
      "bytes 2097152-3145727/*",
      `bytes 3145728-${data.length - 1}/${data.length}`,
    ]);
    expect(fake.objects.get("ckpt-bucket")?.get("runs/r1/model.pt")?.data.equals(data)).toBe(true);
  });

  it("refuses a body contradicting its declared sha256: nothing left behind, small or resumable", async () => {
    const s = store();
    await expect(s.put("d1", Buffer.from("x"), { sha256: "2".repeat(64) })).rejects.toMatchObject({
      code: "STORE_INTEGRITY",
    });
    await expect(
      s.put("d2", randomBytes(2 * MiB), { sha256: "3".repeat(64), multipartThreshold: MiB }),
    ).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
    expect(fake.objects.get("ckpt-bucket")?.has("runs/r1/d1") ?? false).toBe(false);
    expect(fake.objects.get("ckpt-bucket")?.has("runs/r1/d2") ?? false).toBe(false);
  });

  it("a stream body of a declared size uploads resumably", async () => {
    const data = randomBytes(2 * MiB);
    const s = store();
    await s.put(
      "s.bin",
      { stream: Readable.from([data.subarray(0, MiB), data.subarray(MiB)]), size: data.length },
      {
        multipartThreshold: MiB,
      },
    );
    expect(sha(await buffer(await s.get("s.bin")))).toBe(sha(data));
  });

  it("head maps size and sha256; missing is undefined", async () => {
    const s = store();
    const data = Buffer.from("0123456789");
    await s.put("h.bin", data, { sha256: sha(data), metadata: { step: "7" } });
    expect(await s.head("h.bin")).toMatchObject({
      key: "h.bin",
      size: 10,
      sha256: sha(data),
      metadata: { step: "7" },
    });
    expect(await s.head("nope")).toBeUndefined();
  });

  it("ranged get sends an inclusive Range header and returns the exclusive-end slice", async () => {
    const s = store();
    await s.put("r.txt", Buffer.from("hello world, 0123456789"));
    fake.requests.length = 0;
    const stream = await s.get("r.txt", { range: { start: 6, end: 11 } });
    expect((await buffer(stream)).toString()).toBe("world");
    expect(fake.requests[0]!.headers.range).toBe("bytes=6-10");
    expect(query(fake.requests[0]!).get("alt")).toBe("media");
    expect((await buffer(await s.get("r.txt", { range: { start: 23 } }))).toString()).toBe("");
    await expect(s.get("r.txt", { range: { start: 30 } })).rejects.toMatchObject({
      code: "STORE_INVALID_RANGE",
    });
    await expect(s.get("missing")).rejects.toMatchObject({ code: "STORE_NOT_FOUND" });
  });

  it("lists with autoPaginate off, following page tokens, relative keys in byte order", async () => {
    const s = store();
    for (const k of ["b/2", "a/1", "a/3", "a/2", "c"]) await s.put(k, Buffer.from(k));
    await store("other").put("a/1", Buffer.from("x"));
    fake.requests.length = 0;
    const keys: string[] = [];
    for await (const info of s.list("a/", { pageSize: 2 })) keys.push(info.key);
    expect(keys).toEqual(["a/1", "a/2", "a/3"]);
    expect(fake.requests.map((r) => query(r).get("pageToken"))).toEqual([null, "runs/r1/a/2"]);
    expect(fake.requests.every((r) => query(r).get("prefix") === "runs/r1/a/")).toBe(true);
  });

  it("delete ignores a missing object", async () => {
    const s = store();
    await s.put("d", Buffer.from("x"));
    await s.delete("d");
    await s.delete("d");
    expect(await s.head("d")).toBeUndefined();
  });

  it("retries 503 and 429; does not retry 403", async () => {
    const s = store();
    fake.failNext(2, 503);
    await s.put("k", Buffer.from("x"));
    expect(fake.requests).toHaveLength(3);
    fake.failNext(1, 429);
    expect(await s.head("k")).toMatchObject({ size: 1 });
    fake.failNext(1, 403);
    await expect(s.head("k")).rejects.toMatchObject({ code: "STORE_ACCESS_DENIED" });
  });
});
