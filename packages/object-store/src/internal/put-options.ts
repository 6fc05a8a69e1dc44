import { ObjectStoreError } from "../errors.js";
import type { PutOptions } from "../types.js";

const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Metadata names travel as HTTP header suffixes (`x-amz-meta-*`, `x-goog-meta-*`): lower case only. */
const METADATA_NAME = /^[a-z0-9][a-z0-9_-]{0,127}$/;
/** Printable ASCII only: what S3 and GCS both store and return unchanged. */
const METADATA_VALUE = /^[\x20-\x7e]{0,1024}$/;

/**
 * The user metadata a put stores: the caller's entries plus `sha256`. Throws
 * `STORE_INVALID_METADATA` (kind input) for a malformed digest, name or value. Pure.
 */
export function putMetadata(key: string, options: PutOptions | undefined): Record<string, string> {
  const bad = (why: string) =>
    new ObjectStoreError("STORE_INVALID_METADATA", `put ${key}: ${why}.`, { kind: "input", subject: key });
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(options?.metadata ?? {})) {
    if (!METADATA_NAME.test(name)) {
      throw bad(
        `metadata name ${JSON.stringify(name.slice(0, 64))} must be lower-case letters, digits, '-' or '_'`,
      );
    }
    if (name === "sha256") throw bad("pass the digest as the sha256 option, not as metadata");
    if (typeof value !== "string" || !METADATA_VALUE.test(value)) {
      throw bad(`metadata ${name} must be printable ASCII of at most 1024 characters`);
    }
    out[name] = value;
  }
  if (options?.sha256 !== undefined) {
    if (!SHA256_HEX.test(options.sha256)) throw bad("sha256 must be 64 lower-case hex digits");
    out.sha256 = options.sha256;
  }
  return out;
}

/** Splits stored metadata into the ObjectInfo fields `sha256` and `metadata`. Pure. */
export function infoMetadata(stored: Readonly<Record<string, string>>): {
  sha256?: string;
  metadata: Record<string, string>;
} {
  const { sha256, ...metadata } = stored;
  return sha256 === undefined ? { metadata } : { sha256, metadata };
}
