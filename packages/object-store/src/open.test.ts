import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { destinationIdentity } from "./credentials.js";
import { openStore } from "./open.js";

describe("openStore", () => {
  it("shares a memory store's objects by name within the process", async () => {
    const name = `open-${Math.random().toString(36).slice(2)}`;
    const a = await openStore(`memory://${name}/p`);
    await a.put("k", new Uint8Array([1]));
    const b = await openStore(`memory://${name}/p`);
    expect((await b.head("k"))?.size).toBe(1);
    expect(await (await openStore(`memory://${name}/q`)).head("k")).toBeUndefined();
    expect(b.identity).toEqual(destinationIdentity(`memory://${name}/p`));
  });

  it("opens a file store at the URI's absolute directory", async () => {
    const dir = await testdir();
    const store = await openStore(`file://${dir}/archive/`);
    expect(store.identity).toEqual({
      scheme: "file",
      endpoint: "local",
      bucket: `${dir}/archive`,
      prefix: "",
    });
    await store.put("x", new Uint8Array([1, 2]));
    expect((await store.head("x"))?.size).toBe(2);
  });

  it("gives an s3 store exactly the identity the credentials file names, ignoring the environment", async () => {
    const dir = await testdir();
    const path = join(dir, "creds.secret");
    const credentials = {
      aws_access_key_id: "AKID",
      aws_secret_access_key: "very-secret-value",
      endpoint_url: "http://127.0.0.1:9000",
      region_name: "us-east-1",
    };
    await writeFile(path, JSON.stringify(credentials));
    const previous = process.env.AWS_ENDPOINT_URL;
    process.env.AWS_ENDPOINT_URL = "https://elsewhere.example.com";
    try {
      const store = await openStore("s3://bucket/run/ckpt", { credentials: path });
      expect(store.identity).toEqual(destinationIdentity("s3://bucket/run/ckpt", credentials));
      expect(store.identity.endpoint).toBe("127.0.0.1:9000");
      expect(JSON.stringify(store.identity) + store.uri).not.toContain("very-secret-value");
      const aws = await openStore("s3://bucket/p");
      expect(aws.identity).toEqual(destinationIdentity("s3://bucket/p"));
    } finally {
      if (previous === undefined) delete process.env.AWS_ENDPOINT_URL;
      else process.env.AWS_ENDPOINT_URL = previous;
    }
  });

  it("opens gs:// with the default endpoint and refuses HMAC keys there", async () => {
    const store = await openStore("gs://bucket/p");
    expect(store.identity).toEqual(destinationIdentity("gs://bucket/p"));
    await expect(
      openStore("gs://bucket/p", {
        credentials: { aws_access_key_id: "AKID", aws_secret_access_key: "s3cr3t-value" },
      }),
    ).rejects.toMatchObject({
      code: "STORE_BAD_CREDENTIALS",
      message: expect.stringContaining("s3://bucket/prefix"),
    });
  });

  it("refuses a bad URI and a bad credentials file before touching anything", async () => {
    await expect(openStore("file://relative/dir")).rejects.toMatchObject({
      code: "STORE_BAD_URI",
      kind: "input",
    });
    await expect(
      openStore("s3://bucket/p", { credentials: "/nonexistent/creds.json" }),
    ).rejects.toMatchObject({
      code: "STORE_BAD_CREDENTIALS",
    });
  });
});
