import { readFile } from "node:fs/promises";
import { ObjectStoreError } from "./errors.js";
import type { DestinationIdentity, StoreCredentials } from "./types.js";
import { parseStoreUri, type StoreUri } from "./uri.js";

/** A credentials file is four short strings; 64 KiB bounds a wrong file passed by mistake. */
export const MAX_CREDENTIALS_BYTES = 64 * 1024;

/** Endpoint authority used for s3:// when the credentials name no endpoint_url. */
export const DEFAULT_S3_ENDPOINT = "s3.amazonaws.com";
/** Endpoint authority used for gs:// when the credentials name no endpoint_url. */
export const DEFAULT_GCS_ENDPOINT = "storage.googleapis.com";

const FIELDS = ["aws_access_key_id", "aws_secret_access_key", "endpoint_url", "region_name"] as const;

function bad(source: string, problem: string): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_BAD_CREDENTIALS",
    `credentials ${source}: ${problem}. Expected a JSON object ` +
      "{aws_access_key_id, aws_secret_access_key, endpoint_url, region_name} of strings.",
    { kind: "input", subject: source },
  );
}

/** The endpoint_url's authority (host[:port], default port dropped, lower-case); throws on a bad URL. */
function endpointAuthority(endpointUrl: string, source: string): string {
  if (endpointUrl.includes("@")) {
    throw bad(source, "endpoint_url carries user-info; put keys in their own fields, never in the URL");
  }
  let url: URL;
  try {
    url = new URL(endpointUrl);
  } catch {
    throw bad(source, "endpoint_url is not an absolute URL (e.g. https://s3.example.com)");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw bad(source, `endpoint_url has scheme '${url.protocol}'; only http: and https: are supported`);
  }
  if (url.search !== "" || url.hash !== "") throw bad(source, "endpoint_url has a query or a fragment");
  return url.host.toLowerCase();
}

/**
 * Validates parsed JSON as the seeds' credentials format. Unknown keys are ignored (credential
 * files are shared with other tools that add their own); every known key must be a string (null
 * counts as absent), the key id and the secret come together, and endpoint_url must be an http(s)
 * URL without user-info. `source` names the file in messages; no value is ever echoed. Pure.
 */
export function parseCredentials(json: unknown, source: string): StoreCredentials {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw bad(source, "the file does not hold a JSON object");
  }
  const record = json as Record<string, unknown>;
  const out: Record<string, string> = {};
  for (const field of FIELDS) {
    const value = record[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== "string") throw bad(source, `${field} must be a string, not ${typeof value}`);
    if (value.trim() === "") throw bad(source, `${field} is an empty string`);
    out[field] = value;
  }
  if ((out.aws_access_key_id === undefined) !== (out.aws_secret_access_key === undefined)) {
    const missing = out.aws_access_key_id === undefined ? "aws_access_key_id" : "aws_secret_access_key";
    throw bad(source, `${missing} is missing; the key id and the secret come together`);
  }
  if (out.endpoint_url !== undefined) endpointAuthority(out.endpoint_url, source);
  return out as StoreCredentials;
}

/**
 * Reads and validates a credentials file. Throws `STORE_BAD_CREDENTIALS` (kind input) naming the
 * file for an unreadable, oversized, non-JSON or ill-typed file; the parser's own message is not
 * kept because it can quote the file's contents.
 */
export async function loadCredentials(path: string): Promise<StoreCredentials> {
  let text: string;
  try {
    const bytes = await readFile(path);
    if (bytes.byteLength > MAX_CREDENTIALS_BYTES) {
      throw bad(
        path,
        `the file is ${bytes.byteLength} bytes; a credentials file is at most ${MAX_CREDENTIALS_BYTES}`,
      );
    }
    text = bytes.toString("utf8");
  } catch (error) {
    if (error instanceof ObjectStoreError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? "unknown error";
    throw bad(path, `cannot read the file (${code})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw bad(path, "the file is not valid JSON");
  }
  return parseCredentials(json, path);
}

/**
 * The destination identity receipts bind to: endpoint authority, bucket and prefix, no secret.
 * s3:// uses endpoint_url's host[:port] or `s3.amazonaws.com`; gs:// uses endpoint_url's or
 * `storage.googleapis.com`; file:// is endpoint "local" with the absolute root as bucket;
 * memory:// uses the store's name as endpoint and bucket. Pure.
 */
export function destinationIdentity(
  uri: string | StoreUri,
  credentials?: StoreCredentials,
): DestinationIdentity {
  const parsed = typeof uri === "string" ? parseStoreUri(uri) : uri;
  const { scheme, bucket, prefix } = parsed;
  switch (scheme) {
    case "file":
      return { scheme, endpoint: "local", bucket, prefix: "" };
    case "memory":
      return { scheme, endpoint: bucket, bucket, prefix };
    case "s3":
    case "gs": {
      const fallback = scheme === "s3" ? DEFAULT_S3_ENDPOINT : DEFAULT_GCS_ENDPOINT;
      const endpoint =
        credentials?.endpoint_url === undefined
          ? fallback
          : endpointAuthority(credentials.endpoint_url, "(in memory)");
      return { scheme, endpoint, bucket, prefix };
    }
  }
}

/** Field-by-field equality of two identities. Pure. */
export function sameDestination(a: DestinationIdentity, b: DestinationIdentity): boolean {
  return a.scheme === b.scheme && a.endpoint === b.endpoint && a.bucket === b.bucket && a.prefix === b.prefix;
}
