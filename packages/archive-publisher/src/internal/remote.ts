import { randomBytes } from "node:crypto";
import { MAX_RECORD_BYTES, sha256Hex } from "@ckpt/manifest";
import { type ObjectStore, ObjectStoreError } from "@ckpt/object-store";
import { ArchivePublisherError, isAbort, kindOf, messageOf } from "../errors.js";
import { sameBytes } from "./bytes.js";
import { storeNoSpace } from "./space.js";

/** Where a publish stands when a store write fails: a rerun continues from the declaration. */
const PUBLISH_UNCOMMITTED = "The archive is not committed; the publish resumes where it stopped.";

/** Wraps one store request so its failure names the key and stays an ArchivePublisherError. */
export async function storeCall<T>(
  store: ObjectStore,
  what: string,
  key: string,
  call: () => Promise<T>,
): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ArchivePublisherError) throw error;
    // The caller's abort, noticed by the store first, is the publish's abort: not a store failure.
    if (isAbort(error)) {
      throw new ArchivePublisherError(
        "PUBLISH_ABORTED",
        `${what} ${store.uri}/${key}: aborted. ${PUBLISH_UNCOMMITTED}`,
        {
          kind: "failed",
          subject: key,
          cause: error,
        },
      );
    }
    if (error instanceof ObjectStoreError && error.code === "STORE_NO_SPACE") {
      throw storeNoSpace(what, store.uri, key, error, PUBLISH_UNCOMMITTED);
    }
    const kind = kindOf(error);
    throw new ArchivePublisherError(
      "PUBLISH_STORE_FAILED",
      `${what} ${store.uri}/${key}: ${messageOf(error)}` +
        (kind === "transient" ? " Retry the publish; it resumes where it stopped." : ""),
      { kind: kind === "refused" ? "failed" : kind, subject: key, cause: error },
    );
  }
}

/**
 * The whole object, or undefined when it does not exist. Only records are read this way, so a
 * body above the record cap is refused instead of buffered.
 */
export async function readObject(
  store: ObjectStore,
  key: string,
  signal?: AbortSignal,
): Promise<Uint8Array | undefined> {
  return storeCall(store, "read", key, async () => {
    let stream: Awaited<ReturnType<ObjectStore["get"]>>;
    try {
      stream = await store.get(key, signal ? { signal } : {});
    } catch (error) {
      if (error instanceof ObjectStoreError && error.code === "STORE_NOT_FOUND") return undefined;
      throw error;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of stream) {
      size += (chunk as Buffer).byteLength;
      if (size > MAX_RECORD_BYTES) {
        stream.destroy();
        throw new ArchivePublisherError(
          "PUBLISH_REMOTE_CONFLICT",
          `read ${store.uri}/${key}: the object is larger than any ckpt record (${MAX_RECORD_BYTES} bytes); ` +
            "something else lives at this destination. Publish to another destination.",
          { kind: "refused", subject: key },
        );
      }
      chunks.push(Buffer.from(chunk as Uint8Array));
    }
    return new Uint8Array(Buffer.concat(chunks));
  });
}

/** What a listing says about one object. */
export interface ListedObject {
  size: number;
  lastModified?: Date;
}

/** Every object below the store's root, from one listing (paginated as needed). */
export async function listObjects(
  store: ObjectStore,
  signal?: AbortSignal,
): Promise<Map<string, ListedObject>> {
  const objects = new Map<string, ListedObject>();
  for await (const info of store.list("", signal ? { signal } : {})) {
    objects.set(info.key, {
      size: info.size,
      ...(info.lastModified === undefined ? {} : { lastModified: info.lastModified }),
    });
  }
  return objects;
}

/** Size by key of every object below the store's root, from one listing. */
export async function listSizes(store: ObjectStore, signal?: AbortSignal): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  for (const [key, object] of await listObjects(store, signal)) sizes.set(key, object.size);
  return sizes;
}

/** Prefix of the probe objects. */
const CONDITIONAL_PROBE_PREFIX = ".posttrain-archive.probe-";
/** The whole name of a probe object: the prefix and 16 random hex digits, at the store's root. */
const PROBE_KEY = /^\.posttrain-archive\.probe-[0-9a-f]{16}$/;
/** Age after which a leftover probe object is taken as abandoned (a probe lives for seconds). */
export const ABANDONED_PROBE_AGE_MS = 60 * 60 * 1000;

/** The body of the `n`-th conditional create of probe `key` (1: the one that must win). */
function probeBody(key: string, n: 1 | 2): Uint8Array {
  return new TextEncoder().encode(`probe ${key} ${n}\n`);
}

/**
 * The listed objects that are conditional-create probes this tool made and a killed publish left
 * behind: named by the probe scheme, exactly as large as the probe body that name implies, and
 * last written at least `maxAgeMs` before `now` (a live publish deletes its probe within seconds).
 * Anything else, even with a probe-like name, is not this tool's and is never chosen. Pure.
 */
export function abandonedProbes(
  listed: ReadonlyMap<string, ListedObject>,
  now: Date,
  maxAgeMs: number,
): string[] {
  const out: string[] = [];
  for (const [key, object] of listed) {
    if (!PROBE_KEY.test(key) || object.size !== probeBody(key, 1).byteLength) continue;
    if (object.lastModified === undefined) continue;
    if (now.getTime() - object.lastModified.getTime() >= maxAgeMs) out.push(key);
  }
  return out.sort();
}

/**
 * Deletes the abandoned probes {@link abandonedProbes} finds, best effort (one that cannot be
 * deleted now is left for a later publish). Returns the keys deleted.
 */
export async function sweepAbandonedProbes(
  store: ObjectStore,
  listed: ReadonlyMap<string, ListedObject>,
  options: { now: Date; maxAgeMs: number; signal?: AbortSignal },
): Promise<string[]> {
  const removed: string[] = [];
  for (const key of abandonedProbes(listed, options.now, options.maxAgeMs)) {
    const deleted = await store.delete(key, options.signal ? { signal: options.signal } : {}).then(
      () => true,
      () => false,
    );
    if (deleted) removed.push(key);
  }
  return removed;
}

function unenforced(store: ObjectStore, detail: string): ArchivePublisherError {
  return new ArchivePublisherError(
    "PUBLISH_CONDITIONAL_UNENFORCED",
    `publish to ${store.uri}: ${detail}. The store does not enforce conditional creates, so the archive ` +
      "declaration could not protect the destination; publish fails closed. Use an endpoint that honours " +
      "If-None-Match (see `ckpt store qualify`).",
    { kind: "refused", subject: store.uri },
  );
}

/**
 * Checks that the store enforces conditional creates before the first one a publish relies on:
 * creates a unique probe object, creates it again with other bytes (which must answer `exists`
 * and leave the first bytes), then removes it. A store that overwrote fails closed.
 */
export async function probeConditionalCreate(store: ObjectStore, signal?: AbortSignal): Promise<void> {
  const key = `${CONDITIONAL_PROBE_PREFIX}${randomBytes(8).toString("hex")}`;
  const first = probeBody(key, 1);
  const second = probeBody(key, 2);
  const options = signal ? { signal } : {};
  try {
    const a = await storeCall(store, "probe", key, () => store.createIfAbsent(key, first, options));
    // "exists" for a fresh random key: our own create whose answer was lost and which the retry
    // then found, if the object holds exactly our bytes; anything else is not a create-once store.
    if (a.status !== "created") {
      const found = await readObject(store, key, signal);
      if (found === undefined || !sameBytes(found, first))
        throw unenforced(store, `a fresh probe object ${key} was reported as existing`);
    }
    const b = await storeCall(store, "probe", key, () => store.createIfAbsent(key, second, options));
    if (b.status !== "exists")
      throw unenforced(store, `a second conditional create of ${key} reported "created"`);
    const back = await readObject(store, key, signal);
    if (back === undefined || !sameBytes(back, first)) {
      throw unenforced(store, `the probe object ${key} did not keep its first bytes`);
    }
  } finally {
    // Best effort: a leftover probe names itself, is never part of an inventory, and a later
    // publish to this prefix deletes it once it is old enough to be abandoned.
    await store.delete(key, options).catch(() => {});
  }
}

/**
 * A conditional create whose outcome is proven by reading the object back: `created` or
 * `existing` when the object now holds exactly `bytes`, `different` when another object was
 * already there. "Created" with other bytes read back means the condition was not enforced.
 */
export async function createAndConfirm(
  store: ObjectStore,
  key: string,
  bytes: Uint8Array,
  signal?: AbortSignal,
): Promise<"created" | "existing" | "different"> {
  const result = await storeCall(store, "create", key, () =>
    store.createIfAbsent(key, bytes, { sha256: sha256Hex(bytes), ...(signal ? { signal } : {}) }),
  );
  const back = await readObject(store, key, signal);
  if (back === undefined) {
    throw new ArchivePublisherError(
      "PUBLISH_STORE_FAILED",
      `create ${store.uri}/${key}: the store answered "${result.status}" but the object cannot be read back. ` +
        "Retry the publish; it resumes where it stopped.",
      { kind: "transient", subject: key },
    );
  }
  if (sameBytes(back, bytes)) return result.status === "created" ? "created" : "existing";
  if (result.status === "created") {
    throw unenforced(store, `${key} was reported "created" but reads back other bytes`);
  }
  return "different";
}
