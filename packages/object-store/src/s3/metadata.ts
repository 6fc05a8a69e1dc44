import { ObjectStoreError } from "../errors.js";
import type { PutOptions } from "../types.js";

const SHA256_HEX = /^[0-9a-f]{64}$/;
/** User-metadata names travel as HTTP header suffixes (`x-amz-meta-*`, `x-goog-meta-*`). */
const METADATA_NAME = /^[a-z0-9][a-z0-9_-]{0,127}$/;
/** Printable ASCII only: header values, and what S3 and GCS both return unchanged. */
const METADATA_VALUE = /^[\x20-\x7e]{0,1024}$/;

/**
 * The user metadata to store for a put: the caller's entries plus `sha256`. Names are lower case
 * (S3 lower-cases them anyway), values printable ASCII; anything else is refused up front instead
 * of being mangled by a server.
 */
export function userMetadata(options: PutOptions | undefined, subject: string): Record<string, string> {
  const out: Record<string, string> = {};
  const bad = (why: string) =>
    new ObjectStoreError("STORE_INVALID_METADATA", `put ${subject}: ${why}.`, { kind: "input", subject });
  for (const [name, value] of Object.entries(options?.metadata ?? {})) {
    if (!METADATA_NAME.test(name)) {
      throw bad(`metadata name "${name.slice(0, 64)}" must be lower-case letters, digits, '-' or '_'`);
    }
    if (!METADATA_VALUE.test(value))
      throw bad(`metadata "${name}" must be printable ASCII of at most 1024 bytes`);
    out[name] = value;
  }
  if (options?.sha256 !== undefined) {
    if (!SHA256_HEX.test(options.sha256)) throw bad("sha256 must be 64 lower-case hex digits");
    out.sha256 = options.sha256;
  }
  return out;
}
