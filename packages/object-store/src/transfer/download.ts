import { drain, type LongOperation } from "@ckpt/progress";
import { createReadStream, createWriteStream } from "node:fs";
import { Writable } from "node:stream";
import { mkdir, open, rename, stat, unlink } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { ObjectStoreError } from "../errors.js";
import type { ObjectStore } from "../types.js";
import {
  directoryPrefix,
  existingCopy,
  TransferTally,
  type TransferEvent,
  type TransferOptions,
  type TransferReport,
} from "./events.js";
import { DigestingStream } from "./hashing.js";

/** Suffix of the temporary each file is written through before its rename. */
export const PART_SUFFIX = ".part";

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    const info = await stat(path);
    return info.isFile() ? info.size : undefined;
  } catch {
    return undefined;
  }
}

async function sha256Of(path: string, call: { signal?: AbortSignal }): Promise<string> {
  const digesting = new DigestingStream();
  await pipeline(createReadStream(path), digesting, new Writable({ write: (_c, _e, next) => next() }), call);
  return digesting.digest();
}

async function fsyncFile(path: string): Promise<void> {
  const handle = await open(path, "r+");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Download every object under `prefix` (a directory of the store; "" = all) into `localDir`,
 * keeping the path below the prefix. Idempotent: a local file of the same size is skipped, and when
 * the store records the object's sha256 only if the file hashes to it (else it is replaced). Each
 * file is written to `<name>.part`, fsync'ed, checked against its size and recorded sha256, then
 * renamed into place, so a crash leaves a recognisable `.part` and never a short final file.
 */
export async function* downloadPrefixIter(
  store: ObjectStore,
  prefix: string,
  localDir: string,
  options: TransferOptions = {},
): LongOperation<TransferEvent, TransferReport> {
  const tally = new TransferTally();
  const call = options.signal === undefined ? {} : { signal: options.signal };
  const dirPrefix = directoryPrefix(prefix);
  const root = resolve(localDir);
  for await (const listed of store.list(dirPrefix, call)) {
    const key = listed.key;
    const rel = key.slice(dirPrefix.length);
    const target = resolve(root, ...rel.split("/"));
    const inside = relative(root, target);
    if (inside === "" || inside.startsWith(`..${sep}`) || inside === ".." || isAbsolute(inside)) {
      throw new ObjectStoreError(
        "STORE_INVALID_KEY",
        `download ${store.uri}/${key}: the key does not map to a path inside ${root}.`,
        { kind: "refused", subject: `${store.uri}/${key}` },
      );
    }
    const localSize = await sizeOf(target);
    const info = (await store.head(key, call)) ?? listed;
    // The local file is hashed only when a skip depends on it: same size and a recorded digest.
    const local =
      localSize === info.size && info.sha256 !== undefined
        ? { size: localSize, sha256: await sha256Of(target, call) }
        : localSize === undefined
          ? undefined
          : { size: localSize };
    const existing = existingCopy(info, local);
    if (existing === "same-size" || existing === "same-digest") {
      yield tally.skip({ type: "skip", key, size: info.size, reason: existing });
      continue;
    }
    const temporary = `${target}${PART_SUFFIX}`;
    try {
      await mkdir(dirname(target), { recursive: true });
      const digesting = new DigestingStream();
      await pipeline(await store.get(key, call), digesting, createWriteStream(temporary), call);
      await fsyncFile(temporary);
      const actual = digesting.digest();
      if (digesting.bytes !== info.size || (info.sha256 !== undefined && actual !== info.sha256)) {
        throw new ObjectStoreError(
          "STORE_INTEGRITY",
          `download ${store.uri}/${key}: received ${digesting.bytes} bytes hashing to ${actual}, but the object ` +
            `records ${info.size} bytes${info.sha256 === undefined ? "" : ` and sha256 ${info.sha256}`}. ` +
            "The partial file was removed; retry, or check the object.",
          { kind: "failed", subject: `${store.uri}/${key}` },
        );
      }
      await rename(temporary, target);
      yield tally.transfer({
        type: "done",
        key,
        size: info.size,
        sha256: actual,
        ...(existing === "replace" ? { replaced: true as const } : {}),
      });
    } catch (error) {
      await unlink(temporary).catch(() => undefined);
      if (error instanceof ObjectStoreError) throw error;
      throw new ObjectStoreError(
        "STORE_REQUEST_FAILED",
        `download ${store.uri}/${key} to ${join(root, rel)}: ${(error as NodeJS.ErrnoException).code ?? "write failed"}.`,
        { kind: "failed", subject: `${store.uri}/${key}`, cause: error },
      );
    }
  }
  return tally.report();
}

/** `downloadPrefixIter` drained into a report. */
export function downloadPrefix(
  store: ObjectStore,
  prefix: string,
  localDir: string,
  options: TransferOptions = {},
): Promise<TransferReport> {
  return drain(downloadPrefixIter(store, prefix, localDir, options));
}
