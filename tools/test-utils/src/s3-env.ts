import { randomBytes } from "node:crypto";
import type { S3Client } from "@aws-sdk/client-s3";
import { inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    s3Env: S3TestEnv;
  }
}

/** Where the S3 tests find their server: the variables `tools/s3-server/ceph-s3.sh start` prints. */
export interface S3TestEnv {
  readonly endpoint: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly region: string;
  /** Base name of the buckets the tests may create. */
  readonly bucket: string;
}

/** Parse the `export NAME=value` lines printed by ceph-s3.sh start. */
export function parseExports(text: string): S3TestEnv {
  const vars = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^export ([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (match?.[1] !== undefined && match[2] !== undefined) vars.set(match[1], match[2]);
  }
  const need = (name: string): string => {
    const value = vars.get(name);
    if (value === undefined) throw new Error(`ceph-s3.sh start printed no ${name}`);
    return value;
  };
  return {
    endpoint: need("AWS_ENDPOINT_URL"),
    accessKeyId: need("AWS_ACCESS_KEY_ID"),
    secretAccessKey: need("AWS_SECRET_ACCESS_KEY"),
    region: need("AWS_REGION"),
    bucket: need("CKPT_TEST_S3_BUCKET"),
  };
}

export function s3TestEnv(): S3TestEnv {
  return inject("s3Env");
}

/**
 * The seeds' credentials-file shape (structurally @ckpt/object-store's StoreCredentials; declared
 * here so test-utils depends on no package it serves, which would make a build cycle).
 */
export interface TestCredentials {
  readonly aws_access_key_id: string;
  readonly aws_secret_access_key: string;
  readonly endpoint_url: string;
  readonly region_name: string;
}

/** The test server's credentials in the seeds' credentials-file shape. */
export function testCredentials(env: S3TestEnv): TestCredentials {
  return {
    aws_access_key_id: env.accessKeyId,
    aws_secret_access_key: env.secretAccessKey,
    endpoint_url: env.endpoint,
    region_name: env.region,
  };
}

// The SDK is loaded by the helpers that talk to the server, not on import: a test that only needs
// `testdir()` must not load it (the object store's lazy-load test counts its loads).
const sdk = () => import("@aws-sdk/client-s3");

/** A raw SDK client for the test server (to look behind the store's back). */
export async function rawClient(env: S3TestEnv): Promise<S3Client> {
  const { S3Client } = await sdk();
  return new S3Client({
    endpoint: env.endpoint,
    region: env.region,
    forcePathStyle: true,
    credentials: { accessKeyId: env.accessKeyId, secretAccessKey: env.secretAccessKey },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
}

/** Create a fresh bucket named after the test file; the returned cleanup empties and removes it. */
export async function createTestBucket(
  env: S3TestEnv,
  label: string,
): Promise<{ bucket: string; cleanup: () => Promise<void> }> {
  const client = await rawClient(env);
  const {
    AbortMultipartUploadCommand,
    CreateBucketCommand,
    DeleteBucketCommand,
    DeleteObjectCommand,
    ListMultipartUploadsCommand,
    ListObjectsV2Command,
  } = await sdk();
  const bucket = `${env.bucket}-${label}-${randomBytes(4).toString("hex")}`.toLowerCase().slice(0, 63);
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  const cleanup = async () => {
    for (;;) {
      const page = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      const keys = (page.Contents ?? []).flatMap((o) => (o.Key === undefined ? [] : [o.Key]));
      if (keys.length === 0) break;
      await Promise.all(keys.map((Key) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key }))));
    }
    const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    for (const upload of uploads.Uploads ?? []) {
      await client.send(
        new AbortMultipartUploadCommand({ Bucket: bucket, Key: upload.Key, UploadId: upload.UploadId }),
      );
    }
    await client.send(new DeleteBucketCommand({ Bucket: bucket }));
    client.destroy();
  };
  return { bucket, cleanup };
}

/**
 * The keys of the multipart uploads still open under `prefix` (the whole bucket by default),
 * sorted: ListMultipartUploads behind every store's back.
 */
export async function openMultipartUploads(env: S3TestEnv, bucket: string, prefix = ""): Promise<string[]> {
  const { ListMultipartUploadsCommand } = await sdk();
  const client = await rawClient(env);
  try {
    const page = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix }));
    return (page.Uploads ?? []).flatMap((u) => (u.Key === undefined ? [] : [u.Key])).sort();
  } finally {
    client.destroy();
  }
}

/**
 * Stores an object behind every store's back, with whatever metadata the test wants — the only way
 * to make an object whose recorded sha256 contradicts its body (every ckpt store refuses to).
 */
export async function putRawObject(
  env: S3TestEnv,
  bucket: string,
  key: string,
  body: Uint8Array,
  metadata: Record<string, string> = {},
): Promise<void> {
  const { PutObjectCommand } = await sdk();
  const client = await rawClient(env);
  try {
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, Metadata: metadata }));
  } finally {
    client.destroy();
  }
}

/**
 * Starts a multipart upload of `key` and sends one part, never completing nor aborting it: what a
 * killed uploader leaves. Returns its upload id.
 */
export async function startIncompleteUpload(
  env: S3TestEnv,
  bucket: string,
  key: string,
  part: Uint8Array,
): Promise<string> {
  const { CreateMultipartUploadCommand, UploadPartCommand } = await sdk();
  const client = await rawClient(env);
  try {
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    await client.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: part }),
    );
    return UploadId!;
  } finally {
    client.destroy();
  }
}
