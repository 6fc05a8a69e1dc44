import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { destinationIdentity, loadCredentials, parseCredentials, sameDestination } from "./credentials.js";

const SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

async function file(text: string): Promise<string> {
  const dir = await testdir();
  const path = join(dir, "creds.secret");
  await writeFile(path, text);
  return path;
}

describe("loadCredentials", () => {
  it("reads the seeds' format and ignores unknown keys and nulls", async () => {
    const path = await file(
      JSON.stringify({
        aws_access_key_id: "AKID",
        aws_secret_access_key: SECRET,
        endpoint_url: "https://s3.example.com:9000",
        region_name: "us-east-1",
        comment: "shared with boto3",
        aws_session_token: null,
      }),
    );
    await expect(loadCredentials(path)).resolves.toEqual({
      aws_access_key_id: "AKID",
      aws_secret_access_key: SECRET,
      endpoint_url: "https://s3.example.com:9000",
      region_name: "us-east-1",
    });
  });

  it.each([
    [`{"aws_secret_access_key": "${SECRET}", `, "not valid JSON"],
    [`["${SECRET}"]`, "not hold a JSON object"],
    [`{"aws_access_key_id": "AKID", "aws_secret_access_key": 42}`, "must be a string"],
    [`{"aws_access_key_id": "AKID"}`, "aws_secret_access_key is missing"],
    [`{"endpoint_url": "s3.example.com"}`, "not an absolute URL"],
    [`{"endpoint_url": "ftp://s3.example.com"}`, "only http"],
    [`{"endpoint_url": "https://AKID:${SECRET}@s3.example.com"}`, "user-info"],
    [`{"region_name": ""}`, "empty string"],
  ])("refuses %j with STORE_BAD_CREDENTIALS naming the file, never the secret", async (text, problem) => {
    const path = await file(text);
    const error = (await loadCredentials(path).catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: "STORE_BAD_CREDENTIALS", kind: "input" });
    expect(error.message).toContain(path);
    expect(error.message).toContain(problem);
    expect(error.message).not.toContain(SECRET);
    expect(error.message).not.toContain("wJalr");
  });

  it("refuses a missing file and an oversized file", async () => {
    await expect(loadCredentials("/nonexistent/creds.json")).rejects.toMatchObject({
      code: "STORE_BAD_CREDENTIALS",
      message: expect.stringContaining("ENOENT"),
    });
    const path = await file(`{"x": "${"a".repeat(70_000)}"}`);
    await expect(loadCredentials(path)).rejects.toMatchObject({ code: "STORE_BAD_CREDENTIALS" });
  });
});

describe("destinationIdentity", () => {
  const creds = parseCredentials(
    { aws_access_key_id: "AKID", aws_secret_access_key: SECRET, endpoint_url: "HTTPS://Minio.Local:443/" },
    "test",
  );

  it("takes host[:port] from endpoint_url, dropping the default port, and never a secret", () => {
    const id = destinationIdentity("s3://bucket/run/ckpt", creds);
    expect(id).toEqual({ scheme: "s3", endpoint: "minio.local", bucket: "bucket", prefix: "run/ckpt" });
    expect(JSON.stringify(id)).not.toContain(SECRET);
    expect(destinationIdentity("s3://bucket", { endpoint_url: "http://127.0.0.1:9000" }).endpoint).toBe(
      "127.0.0.1:9000",
    );
  });

  it("uses the public endpoints by default", () => {
    expect(destinationIdentity("s3://bucket/p").endpoint).toBe("s3.amazonaws.com");
    expect(destinationIdentity("gs://bucket/p").endpoint).toBe("storage.googleapis.com");
    expect(
      destinationIdentity("gs://bucket/p", { endpoint_url: "https://storage.googleapis.com" }).endpoint,
    ).toBe("storage.googleapis.com");
  });

  it("is 'local' with the absolute root for file:// and the name for memory://", () => {
    expect(destinationIdentity("file:///srv/archive/")).toEqual({
      scheme: "file",
      endpoint: "local",
      bucket: "/srv/archive",
      prefix: "",
    });
    expect(destinationIdentity("memory://m/p")).toEqual({
      scheme: "memory",
      endpoint: "m",
      bucket: "m",
      prefix: "p",
    });
  });

  it("tells destinations apart by endpoint, bucket and prefix", () => {
    const a = destinationIdentity("s3://bucket/p", { endpoint_url: "https://a.example.com" });
    expect(
      sameDestination(a, destinationIdentity("s3://bucket/p/", { endpoint_url: "https://a.example.com/" })),
    ).toBe(true);
    expect(
      sameDestination(a, destinationIdentity("s3://bucket/p", { endpoint_url: "https://b.example.com" })),
    ).toBe(false);
    expect(
      sameDestination(a, destinationIdentity("s3://bucket/q", { endpoint_url: "https://a.example.com" })),
    ).toBe(false);
  });
});
