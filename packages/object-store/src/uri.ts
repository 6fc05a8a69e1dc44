import { ObjectStoreError } from "./errors.js";
import { keyProblem } from "./internal/keys.js";

export type StoreScheme = "s3" | "gs" | "file" | "memory";

/**
 * A parsed store URI. For `file://` the bucket is the absolute root directory and the prefix is
 * empty; for `memory://` the bucket is the store's name.
 */
export interface StoreUri {
  readonly scheme: StoreScheme;
  readonly bucket: string;
  readonly prefix: string;
}

/** S3 bucket names: 3-63 of [a-z0-9.-], starting and ending alphanumeric. */
const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** GCS bucket names: 3-222 of [a-z0-9._-] (dotted names up to 222), alphanumeric at both ends. */
const GCS_BUCKET = /^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/;
const MEMORY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

const EXAMPLES =
  "Expected s3://bucket/prefix, gs://bucket/prefix, file:///absolute/dir or memory://name/prefix.";

function shown(uri: string): string {
  return JSON.stringify(uri.length <= 200 ? uri : `${uri.slice(0, 200)}…`);
}

function bad(uri: string, problem: string, hint = EXAMPLES): ObjectStoreError {
  return new ObjectStoreError("STORE_BAD_URI", `invalid store URI ${shown(uri)}: ${problem}. ${hint}`, {
    kind: "input",
    subject: uri,
  });
}

function parsePrefix(uri: string, rest: string): string {
  const prefix = rest.endsWith("/") ? rest.slice(0, -1) : rest;
  if (prefix === "") return "";
  const problem = keyProblem(prefix);
  if (problem !== undefined) throw bad(uri, `the prefix ${problem.replace(/^the key/, "").trim()}`);
  return prefix;
}

function parseFilePath(uri: string, afterScheme: string): string {
  let path = afterScheme;
  if (path.startsWith("localhost/")) path = path.slice("localhost".length);
  if (!path.startsWith("/")) {
    throw bad(
      uri,
      "a file URI needs an absolute path (three slashes) and no host",
      "Write file:///absolute/dir; relative paths are refused because they depend on the working directory.",
    );
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    throw bad(uri, "the path has a malformed %-escape");
  }
  if (decoded.includes("\u0000")) throw bad(uri, "the path contains a NUL character");
  const segments = decoded.split("/").slice(1);
  if (segments.at(-1) === "") segments.pop();
  if (segments.length === 0) throw bad(uri, "the path is the filesystem root", "Name a directory below '/'.");
  for (const segment of segments) {
    if (segment === "") throw bad(uri, "the path has an empty segment ('//')");
    if (segment === "." || segment === "..") throw bad(uri, `the path has a '${segment}' segment`);
  }
  return `/${segments.join("/")}`;
}

/**
 * Parses `s3://bucket/prefix`, `gs://bucket/prefix`, `file:///abs/dir` or `memory://name/prefix`.
 * Throws `STORE_BAD_URI` (kind input) for anything else: other schemes, credentials, query strings
 * or fragments in the URI, empty or malformed buckets, relative file paths, '.', '..' or empty
 * segments. Pure.
 */
export function parseStoreUri(uri: string): StoreUri {
  if (typeof uri !== "string" || uri.trim() === "") throw bad(String(uri), "the URI is empty");
  if (uri !== uri.trim()) throw bad(uri, "the URI has leading or trailing whitespace");
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/s.exec(uri);
  if (match === null) {
    if (uri.startsWith("/")) throw bad(uri, "a bare path is not a URI", `Write file://${uri}.`);
    throw bad(uri, "no scheme");
  }
  const scheme = match[1]!.toLowerCase();
  const rest = match[2]!;
  if (rest.includes("?") || rest.includes("#")) throw bad(uri, "query strings and fragments are not allowed");
  if (scheme === "file") return { scheme: "file", bucket: parseFilePath(uri, rest), prefix: "" };
  if (scheme !== "s3" && scheme !== "gs" && scheme !== "memory")
    throw bad(uri, `unsupported scheme '${scheme}'`);
  const slash = rest.indexOf("/");
  const authority = slash === -1 ? rest : rest.slice(0, slash);
  const path = slash === -1 ? "" : rest.slice(slash + 1);
  if (authority.includes("@")) {
    throw bad(
      uri,
      "credentials do not belong in a URI",
      "Pass them in a credentials file (--credentials <json>) instead.",
    );
  }
  if (authority === "") throw bad(uri, "the bucket is empty");
  const pattern = scheme === "s3" ? S3_BUCKET : scheme === "gs" ? GCS_BUCKET : MEMORY_NAME;
  if (!pattern.test(authority)) {
    throw bad(
      uri,
      `'${authority}' is not a valid ${scheme === "memory" ? "memory store name" : `${scheme} bucket name`}`,
      scheme === "memory"
        ? "Use letters, digits, '.', '_' and '-'."
        : "Bucket names are lower-case letters, digits, '.' and '-' (GCS also '_'), 3 to 63 characters.",
    );
  }
  return { scheme, bucket: authority, prefix: parsePrefix(uri, path) };
}

/** The canonical URI of a parsed store address (no secret can be in it). Pure. */
export function formatStoreUri(parts: StoreUri): string {
  if (parts.scheme === "file") {
    return `file://${encodeURI(parts.bucket).replace(/\?/g, "%3F").replace(/#/g, "%23")}`;
  }
  return `${parts.scheme}://${parts.bucket}${parts.prefix === "" ? "" : `/${parts.prefix}`}`;
}
