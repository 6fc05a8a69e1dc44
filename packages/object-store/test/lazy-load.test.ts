// The heavy client libraries are loaded only when a store of theirs makes its first request, so a
// file:// or local-only command never pays for them (they are most of a CLI start-up).
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it, vi } from "vitest";

const loaded = vi.hoisted(() => ({ s3: 0, gcs: 0 }));

vi.mock("@aws-sdk/client-s3", async (importOriginal) => {
  loaded.s3++;
  return importOriginal();
});
vi.mock("@google-cloud/storage", async (importOriginal) => {
  loaded.gcs++;
  return importOriginal();
});

describe("client libraries load on first use", () => {
  it("importing the package and using file:// and memory:// loads neither SDK", async () => {
    const { openStore } = await import("../src/index.js");
    const file = await openStore(`file://${await testdir("ckpt-lazy-")}/archive`);
    await file.put("a/b.bin", new Uint8Array([1, 2, 3]));
    expect((await file.head("a/b.bin"))?.size).toBe(3);
    const memory = await openStore("memory://lazy/p");
    await memory.put("k", new Uint8Array([1]));
    expect(loaded).toEqual({ s3: 0, gcs: 0 });
  });

  it("opening an s3:// or gs:// store loads nothing either; its first SDK request loads its SDK once", async () => {
    const { openStore } = await import("../src/index.js");
    const closed = "http://127.0.0.1:1"; // nothing listens: requests fail fast, after the load
    const s3 = await openStore("s3://bucket/prefix", {
      credentials: {
        aws_access_key_id: "AKIDLAZY",
        aws_secret_access_key: "lazy-secret",
        endpoint_url: closed,
      },
      retry: { retries: 0 },
    });
    const gs = await openStore("gs://bucket/prefix", {
      credentials: { endpoint_url: closed },
      retry: { retries: 0 },
    });
    expect(loaded).toEqual({ s3: 0, gcs: 0 });
    // With keys in hand, a HEAD is a plain signed request: still no SDK.
    await expect(s3.head("k")).rejects.toMatchObject({ name: "ObjectStoreError" });
    expect(loaded).toEqual({ s3: 0, gcs: 0 });
    const drain = async () => {
      for await (const _ of s3.list("")) {
        // nothing is listed: the endpoint is closed
      }
    };
    await expect(drain()).rejects.toMatchObject({ name: "ObjectStoreError" });
    await expect(drain()).rejects.toMatchObject({ name: "ObjectStoreError" });
    expect(loaded).toEqual({ s3: 1, gcs: 0 });
    await expect(gs.head("k")).rejects.toMatchObject({ name: "ObjectStoreError" });
    expect(loaded).toEqual({ s3: 1, gcs: 1 });
  });
});
