import { mapPool } from "@ckpt/manifest";
import type { ObjectInfo, ObjectStore } from "@ckpt/object-store";
import { abortedError, asReaderAbort, DEFAULT_HEAD_CONCURRENCY } from "../internal/pool.js";

/** What a HEAD found for one expected object. */
export type RemoteObjectStatus = "ok" | "missing" | "size_mismatch" | "digest_mismatch" | "digest_absent";

/** A file the remote should hold: its key relative to the store, its size and (when recorded) its digest. */
export interface ExpectedRemoteFile {
  readonly path: string;
  readonly size: number;
  readonly sha256?: string;
}

export interface RemoteObjectCheck {
  readonly path: string;
  readonly status: RemoteObjectStatus;
  readonly expected: { readonly size: number; readonly sha256?: string };
  /** What the HEAD reported; absent when the object is missing. */
  readonly actual?: { readonly size: number; readonly sha256?: string };
}

export interface RemoteInventoryCheck {
  /** True when every object is `ok`. */
  readonly ok: boolean;
  /** One entry per expected file, in the order given. */
  readonly objects: readonly RemoteObjectCheck[];
}

export interface VerifyRemoteOptions {
  readonly signal?: AbortSignal;
  /** HEAD requests in flight at once (default 8). */
  readonly concurrency?: number;
}

/**
 * Judges one expected file against what a HEAD reported (`undefined`: no such object). Size is
 * checked first; then, when a digest is expected, the object must carry the same `sha256`
 * metadata. An entry recorded without a digest (a full checkpoint's bulk file) is judged on size
 * alone. Pure.
 */
export function judgeRemoteObject(
  expected: ExpectedRemoteFile,
  info: ObjectInfo | undefined,
): RemoteObjectCheck {
  const want = { size: expected.size, ...(expected.sha256 === undefined ? {} : { sha256: expected.sha256 }) };
  if (info === undefined) return { path: expected.path, status: "missing", expected: want };
  const actual = { size: info.size, ...(info.sha256 === undefined ? {} : { sha256: info.sha256 }) };
  const check = (status: RemoteObjectStatus): RemoteObjectCheck => ({
    path: expected.path,
    status,
    expected: want,
    actual,
  });
  if (info.size !== expected.size) return check("size_mismatch");
  if (expected.sha256 === undefined) return check("ok");
  if (info.sha256 === undefined) return check("digest_absent");
  return check(info.sha256 === expected.sha256 ? "ok" : "digest_mismatch");
}

/**
 * HEADs every file (never downloads) and judges each with {@link judgeRemoteObject}. Store
 * failures (access denied, timeouts after retries) are thrown, not reported as objects: they say
 * nothing about the archive.
 */
export async function verifyRemoteFiles(
  store: ObjectStore,
  files: readonly ExpectedRemoteFile[],
  options: VerifyRemoteOptions = {},
): Promise<RemoteInventoryCheck> {
  const { signal } = options;
  const objects = await mapPool(files, options.concurrency ?? DEFAULT_HEAD_CONCURRENCY, async (file) => {
    if (signal?.aborted) throw abortedError(`verify ${store.uri}`, signal);
    const info = await store
      .head(file.path, signal === undefined ? {} : { signal })
      .catch((error: unknown) => {
        throw asReaderAbort(error, `verify ${store.uri}`);
      });
    return judgeRemoteObject(file, info);
  });
  return { ok: objects.every((o) => o.status === "ok"), objects };
}

/** One line naming what is wrong with an object, for reports and messages. Pure. */
export function describeRemoteCheck(check: RemoteObjectCheck): string {
  const { path, expected, actual } = check;
  switch (check.status) {
    case "ok":
      return `${path}: ok`;
    case "missing":
      return `${path}: missing from the destination`;
    case "size_mismatch":
      return `${path}: the object is ${actual?.size} bytes; ${expected.size} were recorded`;
    case "digest_mismatch":
      return `${path}: the object's sha256 is ${actual?.sha256}; ${expected.sha256} was recorded`;
    case "digest_absent":
      return `${path}: the object carries no sha256 metadata, so it cannot be verified without downloading it`;
  }
}
