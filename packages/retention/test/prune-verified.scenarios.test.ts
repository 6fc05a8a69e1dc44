import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ARTIFACT_MANIFEST, UPLOADED_MARKER, sha256Hex } from "@ckpt/manifest";
import { createMemoryStore, type ObjectStore, openStore, type StoreCredentials } from "@ckpt/object-store";
import { createTestBucket, putRawObject, s3TestEnv, testCredentials, testdir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PruneEvent, type PruneVerifiedOptions, pruneVerified } from "../src/index.js";
import { type ArtifactFixture, makeArtifact, publishDirectly, writeReceipt } from "./fixtures.js";

/** A destination kind: where an artifact is published, and the options prune-verified gets for it. */
interface Backend {
  readonly name: string;
  /** The store at the artifact's destination (its identity is what the receipt binds). */
  storeFor(artifact: ArtifactFixture, local: string): Promise<ObjectStore>;
  readonly options: () => PruneVerifiedOptions;
}

let s3: { bucket: string; credentials: StoreCredentials; cleanup: () => Promise<void> } | undefined;
/** Creates the real-S3 bucket from inside the suites tagged s3 (the fast lane runs none of them). */
function useS3Bucket(): void {
  beforeAll(async () => {
    if (s3 !== undefined) return;
    const env = s3TestEnv();
    const { bucket, cleanup } = await createTestBucket(env, "retention");
    s3 = { bucket, credentials: testCredentials(env), cleanup };
  });
}
afterAll(async () => {
  await s3?.cleanup();
});

let memoryStores = 0;
const localBackends: Backend[] = [
  {
    name: "memory",
    async storeFor(artifact) {
      memoryStores += 1;
      return createMemoryStore({
        name: `retention-${process.pid}-${memoryStores}`,
        prefix: `run/checkpoint_artifacts/iter_${artifact.iteration}`,
      });
    },
    options: () => ({}),
  },
  {
    name: "file://",
    async storeFor(artifact, local) {
      return openStore(`file://${local}/archive/iter_${artifact.iteration}`);
    },
    options: () => ({}),
  },
];
const s3Backend: Backend = {
  name: "s3 (real server)",
  async storeFor(artifact) {
    const prefix = `run-${randomBytes(4).toString("hex")}/checkpoint_artifacts/iter_${artifact.iteration}`;
    return openStore(`s3://${s3!.bucket}/${prefix}`, { credentials: s3!.credentials });
  },
  options: () => ({ credentials: s3!.credentials }),
};

async function listing(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).sort();
}

const scenarios = (backend: Backend) => {
  if (backend === s3Backend) useS3Bucket();
  async function published(): Promise<{ artifact: ArtifactFixture; store: ObjectStore; root: string }> {
    const root = await testdir();
    const artifact = await makeArtifact(root);
    const store = await backend.storeFor(artifact, root);
    await publishDirectly(artifact, store);
    return { artifact, store, root };
  }

  async function keptWith(artifact: ArtifactFixture, options: PruneVerifiedOptions = backend.options()) {
    const before = await listing(artifact.dir);
    const report = await pruneVerified([artifact.dir], options);
    expect(report.removed).toEqual([]);
    expect(report.freed_bytes).toBe(0);
    expect(await listing(artifact.dir)).toEqual(before);
    expect(report.kept).toHaveLength(1);
    return { report, kept: report.kept[0]! };
  }

  it("releases the payload of a proven archive; manifest and receipt stay; a second run finds it released", async () => {
    const { artifact } = await published();
    const events: PruneEvent[] = [];
    const report = await pruneVerified([artifact.dir], {
      ...backend.options(),
      onEvent: (e) => events.push(e),
    });
    expect(report).toEqual({
      removed: [
        {
          path: artifact.dir,
          artifact_dir: artifact.dir,
          files: ["model.pt", "trainer.pt"],
          bytes: artifact.payloadBytes,
        },
      ],
      kept: [],
      freed_bytes: artifact.payloadBytes,
      errors: [],
    });
    expect(await listing(artifact.dir)).toEqual(
      [ARTIFACT_MANIFEST.fileName, UPLOADED_MARKER.fileName].sort(),
    );
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining(["artifact", "verify-remote", "removed-file", "decided"]),
    );
    const again = await pruneVerified([artifact.dir], backend.options());
    expect(again.kept).toMatchObject([{ code: "PRUNE_ALREADY_RELEASED" }]);
    expect(again.errors).toEqual([]);
  });

  it("accepts the artifact's model.pt as the path", async () => {
    const { artifact } = await published();
    const report = await pruneVerified([join(artifact.dir, "model.pt")], backend.options());
    expect(report.removed).toMatchObject([{ artifact_dir: artifact.dir, files: ["model.pt", "trainer.pt"] }]);
  });

  it("keeps an artifact with an extra local file the receipt does not cover", async () => {
    const { artifact } = await published();
    await writeFile(join(artifact.dir, "eval-notes.txt"), "late addition");
    const { kept, report } = await keptWith(artifact);
    expect(kept).toMatchObject({
      code: "PRUNE_UNCOVERED_LOCAL_FILE",
      reason: expect.stringContaining("eval-notes.txt"),
    });
    expect(report.errors).toEqual([]);
  });

  it("keeps an artifact whose receipt is a legacy one-line marker", async () => {
    const { artifact } = await published();
    await writeReceipt(artifact.dir, "uploaded to s3://somewhere at 2024-01-01\n");
    expect((await keptWith(artifact)).kept.code).toBe("PRUNE_LEGACY_RECEIPT");
  });

  it("keeps an artifact without a receipt", async () => {
    const root = await testdir();
    const artifact = await makeArtifact(root);
    expect((await keptWith(artifact)).kept.code).toBe("PRUNE_NO_RECEIPT");
  });

  it("keeps an artifact whose receipt binds another endpoint", async () => {
    const { artifact, store } = await published();
    const marker = JSON.parse(await readFile(join(artifact.dir, UPLOADED_MARKER.fileName), "utf8"));
    marker.destination = { ...store.identity, endpoint: "elsewhere.example.com" };
    await writeReceipt(artifact.dir, UPLOADED_MARKER.serialize(marker));
    expect((await keptWith(artifact)).kept.code).toBe("PRUNE_DESTINATION_MISMATCH");
  });

  it("keeps an artifact whose local bytes changed after publication (same size)", async () => {
    const { artifact } = await published();
    const model = Buffer.from(artifact.files.get("model.pt")!);
    model[0] = model[0]! ^ 0xff;
    await writeFile(join(artifact.dir, "model.pt"), model);
    expect((await keptWith(artifact)).kept.code).toBe("PRUNE_LOCAL_DIGEST_MISMATCH");
  });

  it("keeps an artifact whose remote object was deleted", async () => {
    const { artifact, store } = await published();
    await store.delete("trainer.pt");
    expect((await keptWith(artifact)).kept).toMatchObject({
      code: "PRUNE_REMOTE_MISSING",
      reason: expect.stringContaining("trainer.pt"),
    });
  });

  it("keeps an artifact whose remote object was replaced by other bytes", async () => {
    const { artifact, store } = await published();
    const other = randomBytes(artifact.files.get("model.pt")!.length);
    await store.put("model.pt", other, { sha256: sha256Hex(other) });
    expect((await keptWith(artifact)).kept.code).toBe("PRUNE_REMOTE_DIGEST_MISMATCH");
  });

  it("keeps an artifact whose remote object carries no digest", async () => {
    const { artifact, store } = await published();
    await store.put("trainer.pt", artifact.files.get("trainer.pt")!);
    expect((await keptWith(artifact)).kept.code).toBe("PRUNE_REMOTE_DIGEST_ABSENT");
  });

  it("keeps a full checkpoint under checkpoints/ (released by the retention policies instead)", async () => {
    const root = await testdir();
    const dir = join(root, "run", "20260901120000", "checkpoints", "iter_000000100");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "model.pt"), "weights");
    const report = await pruneVerified([dir, join(root, "missing")], backend.options());
    expect(report.kept.map((k) => k.code)).toEqual(["PRUNE_NOT_AN_ARTIFACT", "PRUNE_NOT_FOUND"]);
    expect(await readFile(join(dir, "model.pt"), "utf8")).toBe("weights");
  });
};
describe.each(localBackends)("prune-verified against $name", scenarios);
describe.each([s3Backend])("prune-verified against $name", { tags: ["s3"] }, scenarios);

describe("prune-verified against a real S3 server whose object contradicts itself", { tags: ["s3"] }, () => {
  useS3Bucket();
  it("reports an error and keeps the artifact when an object claims the recorded digest with another size", async () => {
    const root = await testdir();
    const artifact = await makeArtifact(root);
    const prefix = `run-${randomBytes(4).toString("hex")}/checkpoint_artifacts/iter_300`;
    const store = await openStore(`s3://${s3!.bucket}/${prefix}`, { credentials: s3!.credentials });
    await publishDirectly(artifact, store);
    const bytes = artifact.files.get("model.pt")!;
    await putRawObject(s3TestEnv(), s3!.bucket, `${prefix}/model.pt`, bytes.subarray(1), {
      sha256: sha256Hex(bytes),
    });
    const report = await pruneVerified([artifact.dir], { credentials: s3!.credentials });
    expect(report.kept).toMatchObject([{ code: "PRUNE_REMOTE_SIZE_CONFLICT" }]);
    expect(report.errors).toMatchObject([{ path: artifact.dir, code: "PRUNE_REMOTE_SIZE_CONFLICT" }]);
    expect(report.removed).toEqual([]);
    expect(await listing(artifact.dir)).toContain("model.pt");
  });

  it("keeps an artifact when the credentials address another endpoint than the receipt binds", async () => {
    const root = await testdir();
    const artifact = await makeArtifact(root);
    const store = await openStore(`s3://${s3!.bucket}/run-${randomBytes(4).toString("hex")}/iter_300`, {
      credentials: s3!.credentials,
    });
    await publishDirectly(artifact, store);
    const report = await pruneVerified([artifact.dir], {
      credentials: { ...s3!.credentials, endpoint_url: "https://s3.other.example.com" },
    });
    expect(report.kept).toMatchObject([
      { code: "PRUNE_DESTINATION_MISMATCH", reason: expect.stringContaining("s3.other.example.com") },
    ]);
    expect(await listing(artifact.dir)).toContain("model.pt");
  });
});

describe("prune-verified with a lying or failing memory store", () => {
  async function publishedMemory() {
    const root = await testdir();
    const artifact = await makeArtifact(root);
    const name = `retention-lie-${randomBytes(4).toString("hex")}`;
    const prefix = "run/checkpoint_artifacts/iter_300";
    await publishDirectly(artifact, createMemoryStore({ name, prefix }));
    return { artifact, name, prefix };
  }

  it("keeps an artifact when HEAD reports another digest (lieOnHead)", async () => {
    const { artifact, name, prefix } = await publishedMemory();
    const liar = createMemoryStore({
      name,
      prefix,
      faults: [{ type: "lieOnHead", key: "model.pt", sha256: "0".repeat(64) }],
    });
    const report = await pruneVerified([artifact.dir], { openStoreFor: async () => liar });
    expect(report.kept).toMatchObject([{ code: "PRUNE_REMOTE_DIGEST_MISMATCH" }]);
    expect(report.removed).toEqual([]);
    expect(await listing(artifact.dir)).toContain("model.pt");
  });

  it("errors when HEAD claims the recorded digest with another size (lieOnHead size)", async () => {
    const { artifact, name, prefix } = await publishedMemory();
    const liar = createMemoryStore({
      name,
      prefix,
      faults: [{ type: "lieOnHead", key: "model.pt", size: 1 }],
    });
    const report = await pruneVerified([artifact.dir], { openStoreFor: async () => liar });
    expect(report.kept).toMatchObject([{ code: "PRUNE_REMOTE_SIZE_CONFLICT" }]);
    expect(report.errors).toMatchObject([
      { code: "PRUNE_REMOTE_SIZE_CONFLICT", message: expect.stringContaining("model.pt") },
    ]);
    expect(await listing(artifact.dir)).toContain("model.pt");
  });

  it("errors and keeps when the store cannot be reached, and goes on with the next path", async () => {
    const first = await publishedMemory();
    const second = await publishedMemory();
    const failing = createMemoryStore({
      name: first.name,
      prefix: first.prefix,
      retry: { retries: 0 },
      faults: [{ type: "fail", op: "head" }],
    });
    const report = await pruneVerified([first.artifact.dir, second.artifact.dir], {
      openStoreFor: async (d) =>
        d.endpoint === first.name ? failing : openStore(`memory://${d.bucket}/${d.prefix}`),
    });
    expect(report.errors).toMatchObject([{ path: first.artifact.dir, code: "PRUNE_REMOTE_UNREACHABLE" }]);
    expect(report.removed.map((r) => r.path)).toEqual([second.artifact.dir]);
  });

  it("keeps an artifact holding a symbolic link, even one the receipt names", async () => {
    const { artifact } = await publishedMemory();
    await rm(join(artifact.dir, "trainer.pt"));
    await symlink(join(artifact.dir, "model.pt"), join(artifact.dir, "trainer.pt"));
    const report = await pruneVerified([artifact.dir]);
    expect(report.kept).toMatchObject([{ code: "PRUNE_UNCOVERED_LOCAL_FILE" }]);
  });

  it("keeps an artifact whose receipt entry lacks a digest", async () => {
    const { artifact } = await publishedMemory();
    const marker = JSON.parse(await readFile(join(artifact.dir, UPLOADED_MARKER.fileName), "utf8"));
    delete marker.files[0].sha256;
    await writeReceipt(artifact.dir, JSON.stringify(marker));
    expect((await pruneVerified([artifact.dir])).kept).toMatchObject([{ code: "PRUNE_MISSING_DIGEST" }]);
  });

  it.each([
    ["an empty JSON object", "{}"],
    ["torn JSON", '{"schema": "posttrain.archive-marker.v1", "files": ['],
    ["binary garbage", Buffer.from([0xff, 0xfe, 0x00, 0x7b])],
    ["a FIFO", undefined],
  ])("keeps every file of an artifact whose receipt is %s (it proves nothing)", async (_, bytes) => {
    const { artifact } = await publishedMemory();
    const receipt = join(artifact.dir, UPLOADED_MARKER.fileName);
    await rm(receipt);
    if (bytes === undefined) execFileSync("mkfifo", [receipt]);
    else await writeFile(receipt, bytes);
    const before = await listing(artifact.dir);
    const report = await pruneVerified([artifact.dir]);
    expect(report.removed).toEqual([]);
    expect(report.kept).toMatchObject([{ code: "PRUNE_INVALID_RECEIPT" }]);
    expect(await listing(artifact.dir)).toEqual(before);
    expect(await readFile(join(artifact.dir, "model.pt"))).toEqual(
      Buffer.from(artifact.files.get("model.pt")!),
    );
  });

  it("stops with RETENTION_ABORTED when aborted", async () => {
    const { artifact } = await publishedMemory();
    const controller = new AbortController();
    controller.abort();
    await expect(pruneVerified([artifact.dir], { signal: controller.signal })).rejects.toMatchObject({
      code: "RETENTION_ABORTED",
    });
    expect(await listing(artifact.dir)).toContain("model.pt");
  });
});
