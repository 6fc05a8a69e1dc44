import type { S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import { DEFAULT_S3_ENDPOINT } from "../credentials.js";
import { ObjectStoreError } from "../errors.js";
import { lazy } from "../internal/lazy.js";
import type { StoreCredentials } from "../types.js";

/** The AWS SDK module, loaded on first use (see `lazy`). */
export type S3Sdk = typeof import("@aws-sdk/client-s3");
export const loadS3Sdk: () => Promise<S3Sdk> = lazy(() => {
  // The SDK warns on every Node 20 run that its future releases will need Node 22; printed before
  // each command's own output it buries real errors. Its own switch silences that one warning only
  // (every other warning still prints), and an operator's explicit setting is kept.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  return import("@aws-sdk/client-s3");
});

/** How the S3 API behind an endpoint must be spoken to. */
export type S3Dialect = "aws" | "s3-compatible" | "gcs";

export interface ResolvedS3Endpoint {
  /** Explicit endpoint URL, or undefined for AWS's own endpoints. */
  readonly endpoint: string | undefined;
  /** host[:port] for the destination identity (no user-info, no secret). */
  readonly authority: string;
  readonly region: string;
  readonly dialect: S3Dialect;
}

const GCS_XML_HOST = "storage.googleapis.com";

function isAwsHost(host: string): boolean {
  return host === "amazonaws.com" || host.endsWith(".amazonaws.com") || host.endsWith(".amazonaws.com.cn");
}

/**
 * Work out the endpoint, region and dialect. Order: explicit option, credentials file, then the
 * `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` / `AWS_REGION` / `AWS_DEFAULT_REGION` variables of
 * `env`. `storage.googleapis.com` (or `dialect: "gcs"`) selects the GCS XML quirks.
 */
export function resolveS3Endpoint(input: {
  endpoint?: string;
  region?: string;
  credentials?: StoreCredentials;
  dialect?: S3Dialect;
  env: Readonly<Record<string, string | undefined>>;
}): ResolvedS3Endpoint {
  const raw =
    input.endpoint ??
    input.credentials?.endpoint_url ??
    input.env.AWS_ENDPOINT_URL_S3 ??
    input.env.AWS_ENDPOINT_URL ??
    undefined;
  const endpoint = raw === undefined || raw === "" ? undefined : raw;
  let host: string | undefined;
  if (endpoint !== undefined) {
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch (error) {
      throw new ObjectStoreError(
        "STORE_BAD_URI",
        `S3 endpoint "${endpoint}" is not a URL. Write it as http(s)://host[:port].`,
        { kind: "input", cause: error },
      );
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new ObjectStoreError(
        "STORE_BAD_URI",
        `S3 endpoint "${url.protocol}//${url.host}" must use http or https.`,
        { kind: "input" },
      );
    }
    host = url.host;
  }
  const hostname = host?.replace(/:\d+$/, "");
  const dialect: S3Dialect =
    input.dialect ??
    (hostname === undefined || isAwsHost(hostname)
      ? "aws"
      : hostname === GCS_XML_HOST
        ? "gcs"
        : "s3-compatible");
  const region =
    input.region ??
    input.credentials?.region_name ??
    input.env.AWS_REGION ??
    input.env.AWS_DEFAULT_REGION ??
    (dialect === "gcs" ? "auto" : "us-east-1");
  const authority = host?.toLowerCase() ?? DEFAULT_S3_ENDPOINT;
  return { endpoint, authority, region, dialect };
}

/**
 * Libraries never print. The SDK's retry middleware writes to `console` when a streaming request
 * fails and its logger is the default NoOpLogger, so a logger object of our own is passed.
 */
const SILENT_LOGGER = {
  trace: () => {},
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};

/**
 * The SDK client configuration for an endpoint. Non-AWS endpoints get path-style addressing (an IP
 * or a private host has no per-bucket DNS) and checksums only when an operation requires them: the
 * SDK's default streams bodies with `aws-chunked` trailers, which Ceph pacific answers with
 * `411 MissingContentLength` and GCS rejects. SDK retries are off: `withRetry` owns retrying. No
 * `Expect: 100-continue`: it costs every upload a round trip for a refusal that is rare and cheap
 * (bodies are at most a part or the multipart threshold). Throws `STORE_BAD_CREDENTIALS` for half
 * a key pair. Pure.
 */
export function s3ClientConfig(
  resolved: ResolvedS3Endpoint,
  credentials: StoreCredentials | undefined,
): S3ClientConfig {
  const config: S3ClientConfig = {
    region: resolved.region,
    maxAttempts: 1,
    logger: SILENT_LOGGER,
    expectContinueHeader: false,
  };
  // Always pin the endpoint: left unset, the SDK would take AWS_ENDPOINT_URL or a profile's
  // endpoint_url by itself, and requests would go somewhere the store's identity does not name.
  config.endpoint = resolved.endpoint ?? `https://s3.${resolved.region}.amazonaws.com`;
  if (resolved.dialect !== "aws") {
    config.forcePathStyle = true;
    config.requestChecksumCalculation = "WHEN_REQUIRED";
    config.responseChecksumValidation = "WHEN_REQUIRED";
  }
  const id = credentials?.aws_access_key_id;
  const secret = credentials?.aws_secret_access_key;
  if ((id === undefined) !== (secret === undefined)) {
    throw new ObjectStoreError(
      "STORE_BAD_CREDENTIALS",
      "S3 credentials need both aws_access_key_id and aws_secret_access_key, or neither (then the SDK's default chain is used).",
      { kind: "input" },
    );
  }
  if (id !== undefined && secret !== undefined)
    config.credentials = { accessKeyId: id, secretAccessKey: secret };
  return config;
}

/** The SDK client for an endpoint (loads the SDK): {@link s3ClientConfig} applied. */
export async function makeS3Client(
  resolved: ResolvedS3Endpoint,
  credentials: StoreCredentials | undefined,
): Promise<S3Client> {
  const config = s3ClientConfig(resolved, credentials);
  const { S3Client } = await loadS3Sdk();
  return new S3Client(config);
}
