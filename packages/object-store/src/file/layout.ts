import { ObjectStoreError } from "../errors.js";
import { isNoSpace } from "@ckpt/errors";
import { join } from "node:path";

/** The directory under the root that holds metadata sidecars; keys may not use the name. */
export const META_DIR = ".ckpt-meta";
/** Temporaries (payloads and sidecars being written) start with this; keys may not use it. */
export const TEMP_PREFIX = ".ckpt-tmp.";

/** A fresh temporary's name: the prefix and 16 random hex digits. */
export function temporaryName(random: string): string {
  return `${TEMP_PREFIX}${random}`;
}

const TEMPORARY_NAME = /^\.ckpt-tmp\.[0-9a-f]{16}$/;

/**
 * Whether `name` is exactly what a file store names its temporaries ({@link temporaryName} of 8
 * random bytes): the proof `ckpt gc` needs before removing one. A look-alike is not ours. Pure.
 */
export function isFileStoreTemporary(name: string): boolean {
  return TEMPORARY_NAME.test(name);
}

/** The payload path of `key` (already validated) under `root`. Pure. */
export function payloadPath(root: string, key: string): string {
  return join(root, ...key.split("/"));
}

/**
 * The sidecar of the payload inode `ino` of `key`: `<root>/.ckpt-meta/<key>.<ino>.json`. Binding
 * the sidecar to the inode lets it be written before the payload becomes visible (link and rename
 * keep the inode), so an object never appears without its metadata, and a sidecar cannot describe
 * another file. `<ino>` is digits only, so no two keys share a sidecar name. Pure.
 */
export function sidecarPath(root: string, key: string, ino: bigint): string {
  return `${join(root, META_DIR, ...key.split("/"))}.${ino}.json`;
}

/** What a sidecar records: the payload's identity (inode, size, mtime) and its user metadata. */
export interface Sidecar {
  readonly version: 1;
  readonly ino: string;
  readonly size: number;
  readonly mtimeNs: string;
  readonly metadata: Readonly<Record<string, string>>;
}

/**
 * The sidecar's metadata if it still describes the payload (same inode, size and mtime), else {}:
 * a payload changed in place, or a sidecar left by a crash, yields no digest rather than a wrong
 * one. Pure.
 */
export function sidecarMetadata(
  sidecar: unknown,
  payload: { ino: bigint; size: bigint; mtimeNs: bigint },
): Record<string, string> {
  if (typeof sidecar !== "object" || sidecar === null) return {};
  const s = sidecar as Partial<Sidecar>;
  if (s.version !== 1 || s.ino !== String(payload.ino) || s.mtimeNs !== String(payload.mtimeNs)) return {};
  if (s.size !== Number(payload.size) || typeof s.metadata !== "object" || s.metadata === null) return {};
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(s.metadata)) if (typeof value === "string") out[name] = value;
  return out;
}

/**
 * The outcome of `link(temp, final)` for a conditional create. On NFS a retransmitted LINK whose
 * first reply was lost reports EEXIST (or another error) although the link was made; the temp's
 * link count tells: 2 means this call created `final`. Pure.
 */
export function linkOutcome(
  errorCode: string | undefined,
  tempLinkCount: number | undefined,
): "created" | "exists" | "failed" {
  if (errorCode === undefined) return "created";
  if (tempLinkCount === 2) return "created";
  return errorCode === "EEXIST" ? "exists" : "failed";
}

/** The errno code of a Node filesystem error. */
export function errnoCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * The ObjectStoreError for a filesystem failure of `action` on `key`: permission problems are
 * STORE_ACCESS_DENIED, a key colliding with a directory (or a file where a directory is needed) is
 * STORE_INVALID_KEY (refused), the rest STORE_REQUEST_FAILED naming the errno. Pure.
 */
export function fileError(action: string, key: string, uri: string, error: unknown): ObjectStoreError {
  if (error instanceof ObjectStoreError) return error;
  const code = errnoCode(error) ?? "unknown error";
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
    return new ObjectStoreError(
      "STORE_ACCESS_DENIED",
      `${action} ${key} in ${uri}: permission denied (${code}). Check the directory's owner and mode.`,
      { kind: "refused", subject: key, cause: error },
    );
  }
  if (isNoSpace(error)) {
    return noSpace(action, key, uri, code, error);
  }
  if (code === "EISDIR" || code === "ENOTDIR" || code === "EEXIST") {
    return new ObjectStoreError(
      "STORE_INVALID_KEY",
      `${action} ${key} in ${uri}: the path collides with another entry (${code}): a file stands where a ` +
        "directory is needed, or the reverse. A filesystem store cannot hold both 'a' and 'a/b'.",
      { kind: "refused", subject: key, cause: error },
    );
  }
  return new ObjectStoreError("STORE_REQUEST_FAILED", `${action} ${key} in ${uri}: ${code}.`, {
    kind: "failed",
    subject: key,
    cause: error,
  });
}

/**
 * The filesystem under the store is full (or the quota reached): nothing was stored under the key
 * and the write's temporary is gone, so freeing space and running again is all it takes.
 */
export function noSpace(
  action: string,
  key: string,
  uri: string,
  detail: string,
  cause?: unknown,
): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_NO_SPACE",
    `${action} ${key} in ${uri}: no space left (${detail}). Nothing was stored under the key and no temporary was left; free space and run again.`,
    { kind: "failed", subject: key, ...(cause === undefined ? {} : { cause }) },
  );
}
