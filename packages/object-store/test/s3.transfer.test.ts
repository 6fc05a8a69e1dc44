// @module-tag s3
import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { buffer } from "node:stream/consumers";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { testdir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryStore } from "../src/memory/store.js";
import { createS3Store } from "../src/s3/store.js";
import { copyPrefix } from "../src/transfer/copy.js";
import { downloadPrefix, downloadPrefixIter } from "../src/transfer/download.js";
import { createTestBucket, rawClient, s3TestEnv, testCredentials } from "@ckpt/test-utils";

const env = s3TestEnv();
const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");
const MiB = 1024 * 1024;
let bucket = "";
let cleanup: () => Promise<void> = async () => {};
beforeAll(async () => {
  ({ bucket, cleanup } = await createTestBucket(env, "transfer"));
});
afterAll(() => cleanup());

const s3 = (prefix: string) =>
  createS3Store({ bucket, prefix, credentials: testCredentials(env), retry: { retries: 1 }, env: {} });

describe("copyPrefix (streaming get → put, no server-side copy)", () => {
  it("copies a prefix between S3 prefixes with digests and metadata, then skips on a second run", async () => {
    const src = s3(`copy-src-${randomBytes(3).toString("hex")}`);
    const dst = s3(`copy-dst-${randomBytes(3).toString("hex")}`);
    const big = randomBytes(6 * MiB + 5);
    await src.put("iter_1/model.pt", big, { sha256: sha(big), metadata: { step: "1" } });
    await src.put("iter_1/trainer.pt", Buffer.from("tiny"));
    await src.put("iter_10/model.pt", Buffer.from("not in iter_1/"));
    const report = await copyPrefix(src, dst, { prefix: "iter_1", multipartThreshold: 5 * MiB });
    expect(report.transferred.map((t) => t.key)).toEqual(["iter_1/model.pt", "iter_1/trainer.pt"]);
    expect(report.bytes).toBe(big.length + 4);
    expect(await dst.head("iter_1/model.pt")).toMatchObject({
      size: big.length,
      sha256: sha(big),
      metadata: { step: "1" },
    });
    expect(sha(await buffer(await dst.get("iter_1/model.pt")))).toBe(sha(big));
    expect(await dst.head("iter_10/model.pt")).toBeUndefined();
    const again = await copyPrefix(src, dst, { prefix: "iter_1" });
    expect(again.transferred).toEqual([]);
    expect(again.skipped.map((s) => s.key)).toEqual(["iter_1/model.pt", "iter_1/trainer.pt"]);
  });

  it("recopies an object whose destination copy has the same size but another digest", async () => {
    const src = createMemoryStore();
    const dst = createMemoryStore();
    await src.put("a", Buffer.from("new!"), { sha256: sha(Buffer.from("new!")) });
    await dst.put("a", Buffer.from("old!"), { sha256: sha(Buffer.from("old!")) });
    const report = await copyPrefix(src, dst);
    expect(report.transferred.map((t) => t.key)).toEqual(["a"]);
    expect((await buffer(await dst.get("a"))).toString()).toBe("new!");
  });

  it("refuses to copy bytes that contradict the source's recorded sha256, leaving no copy", async () => {
    const prefix = `corrupt-${randomBytes(3).toString("hex")}`;
    await (await rawClient(env)).send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: `${prefix}/a`,
        Body: "bytes",
        Metadata: { sha256: "0".repeat(64) },
      }),
    );
    const dst = createMemoryStore();
    await expect(copyPrefix(s3(prefix), dst)).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
    expect(await dst.head("a")).toBeUndefined();
  });
});

describe("downloadPrefix (.part temporaries, same-size skip)", () => {
  it("downloads a prefix from S3 into a directory tree and verifies each file", async () => {
    const store = s3(`dl-${randomBytes(3).toString("hex")}`);
    const model = randomBytes(MiB + 3);
    await store.put("base/model.pt", model, { sha256: sha(model) });
    await store.put("base/tok/vocab.json", Buffer.from("{}"), { sha256: sha(Buffer.from("{}")) });
    await store.put("basement/other", Buffer.from("outside the directory"));
    const dir = await testdir();
    const events = [];
    for await (const event of downloadPrefixIter(store, "base", dir)) events.push(event);
    expect(events).toEqual([
      { type: "done", key: "base/model.pt", size: model.length, sha256: sha(model) },
      { type: "done", key: "base/tok/vocab.json", size: 2, sha256: sha(Buffer.from("{}")) },
    ]);
    expect(sha(await readFile(join(dir, "model.pt")))).toBe(sha(model));
    expect(await readFile(join(dir, "tok/vocab.json"), "utf8")).toBe("{}");
    expect((await readdir(dir)).sort()).toEqual(["model.pt", "tok"]);
    const again = await downloadPrefix(store, "base/", dir);
    expect(again).toMatchObject({ transferred: [], bytes: 0 });
    expect(again.skipped).toHaveLength(2);
  });

  it("replaces a local file of another size and a stale .part", async () => {
    const store = createMemoryStore();
    await store.put("x/f", Buffer.from("fresh content"));
    const dir = await testdir();
    await writeFile(join(dir, "f"), "short");
    await writeFile(join(dir, "f.part"), "leftover from a crash");
    const report = await downloadPrefix(store, "x", dir);
    expect(report.transferred).toEqual([{ key: "x/f", size: 13 }]);
    expect(await readFile(join(dir, "f"), "utf8")).toBe("fresh content");
    await expect(stat(join(dir, "f.part"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("keeps no partial file when the bytes contradict the recorded digest", async () => {
    const prefix = `corrupt-dl-${randomBytes(3).toString("hex")}`;
    await (await rawClient(env)).send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: `${prefix}/x/f`,
        Body: "abc",
        Metadata: { sha256: "1".repeat(64) },
      }),
    );
    const dir = await testdir();
    await expect(downloadPrefix(s3(prefix), "x", dir)).rejects.toMatchObject({ code: "STORE_INTEGRITY" });
    expect(await readdir(dir)).toEqual([]);
  });
});
