import { ObjectStoreError } from "../errors.js";

/** S3's key limit is 1024 bytes of UTF-8; GCS allows the same. Keys longer than that are refused. */
const MAX_KEY_BYTES = 1024;

/**
 * Segment prefixes reserved for the file store's bookkeeping (metadata sidecars and temporaries).
 * Refused on every backend so one key works everywhere.
 */
const RESERVED_SEGMENT_PREFIXES: readonly string[] = [".ckpt-meta", ".ckpt-tmp"];

/** Why `key` is not a valid object key, or undefined when it is. Pure. */
export function keyProblem(key: string, options: { allowTrailingSlash?: boolean } = {}): string | undefined {
  if (typeof key !== "string") return "a key must be a string";
  if (key.length === 0) return "the key is empty";
  if (Buffer.byteLength(key, "utf8") > MAX_KEY_BYTES) return `the key is longer than ${MAX_KEY_BYTES} bytes`;
  if (key.includes("\\")) return "the key contains a backslash; keys are POSIX paths with '/'";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(key)) return "the key contains a NUL or control character";
  if (key.startsWith("/")) return "the key is absolute; keys are relative to the store's prefix";
  const segments = key.split("/");
  if (options.allowTrailingSlash && segments.length > 1 && segments.at(-1) === "") segments.pop();
  for (const segment of segments) {
    if (segment === "") return "the key has an empty segment ('//' or a trailing '/')";
    if (segment === "." || segment === "..") return `the key has a '${segment}' segment`;
    const reserved = RESERVED_SEGMENT_PREFIXES.find((p) => segment.startsWith(p));
    if (reserved !== undefined) return `the segment '${segment}' uses the reserved prefix '${reserved}'`;
  }
  return undefined;
}

function truncate(text: string, max = 120): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** Throws `STORE_INVALID_KEY` unless `key` is a relative POSIX key without '.', '..' or empty segments. */
export function validateKey(key: string): void {
  const problem = keyProblem(key);
  if (problem !== undefined) {
    throw new ObjectStoreError(
      "STORE_INVALID_KEY",
      `invalid object key ${JSON.stringify(truncate(String(key)))}: ${problem}. ` +
        "Use a relative path like 'iter_000000100/model.safetensors'.",
      { kind: "input", subject: truncate(String(key)) },
    );
  }
}

/**
 * Throws `STORE_INVALID_KEY` unless `prefix` is "" or the beginning of a valid key (a trailing '/'
 * is allowed, and the last segment may be partial, e.g. "iter_00").
 */
export function validateListPrefix(prefix: string): void {
  if (prefix === "") return;
  const problem = keyProblem(prefix, { allowTrailingSlash: true });
  if (problem !== undefined) {
    throw new ObjectStoreError(
      "STORE_INVALID_KEY",
      `invalid list prefix ${JSON.stringify(truncate(prefix))}: ${problem}.`,
      { kind: "input", subject: truncate(prefix) },
    );
  }
}

/** Byte order of the UTF-8 encodings, which is the order S3 and GCS list keys in. */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

/** `prefix/key` for a store prefix that may be empty. */
export function joinPrefix(prefix: string, key: string): string {
  return prefix === "" ? key : `${prefix}/${key}`;
}

/** The key of the full object name `name` below a store prefix that may be empty (`joinPrefix` undone). */
export function keyBelow(prefix: string, name: string): string {
  return prefix === "" ? name : name.slice(prefix.length + 1);
}
