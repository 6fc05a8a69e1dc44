import { drain, type LongOperation } from "@ckpt/progress";
import { pipeline } from "node:stream/promises";
import { ObjectStoreError } from "../errors.js";
import type { ObjectStore } from "../types.js";
import { DigestingStream } from "./hashing.js";
import {
  directoryPrefix,
  existingCopy,
  TransferTally,
  type TransferEvent,
  type TransferOptions,
  type TransferReport,
} from "./events.js";

export interface CopyPrefixOptions extends TransferOptions {
  /** Directory below the source store to copy ("" = everything); keys keep their names. */
  readonly prefix?: string;
}

/**
 * Copy every object under `prefix` from `src` to `dst` by streaming get → put (no server-side
 * copy: GCS's S3 API has no multipart copy). Idempotent: an object already at the destination
 * with the same size (and the same sha256 when both sides record one) is skipped. The sha256 and
 * user metadata travel with the object, and the bytes are hashed on the way: a copy whose bytes
 * disagree with the source's recorded sha256 is removed and the copy fails.
 */
export async function* copyPrefixIter(
  src: ObjectStore,
  dst: ObjectStore,
  options: CopyPrefixOptions = {},
): LongOperation<TransferEvent, TransferReport> {
  const tally = new TransferTally();
  const call = options.signal === undefined ? {} : { signal: options.signal };
  for await (const listed of src.list(directoryPrefix(options.prefix ?? ""), call)) {
    const key = listed.key;
    const source = (await src.head(key, call)) ?? listed;
    const existing = existingCopy(source, await dst.head(key, call));
    if (existing === "same-size" || existing === "same-digest") {
      yield tally.skip({ type: "skip", key, size: source.size, reason: existing });
      continue;
    }
    const digesting = new DigestingStream();
    const body = await src.get(key, call);
    const upload = dst.put(
      key,
      { stream: digesting, size: source.size },
      {
        ...call,
        metadata: source.metadata,
        ...(source.sha256 === undefined ? {} : { sha256: source.sha256 }),
        ...(options.multipartThreshold === undefined
          ? {}
          : { multipartThreshold: options.multipartThreshold }),
        ...(options.partSize === undefined ? {} : { partSize: options.partSize }),
        ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
      },
    );
    try {
      await Promise.all([pipeline(body, digesting, call), upload]);
    } catch (error) {
      body.destroy();
      digesting.destroy();
      throw error;
    }
    const actual = digesting.digest();
    if (source.sha256 !== undefined && actual !== source.sha256) {
      await dst.delete(key, call);
      throw new ObjectStoreError(
        "STORE_INTEGRITY",
        `copy ${src.uri}/${key} to ${dst.uri}/${key}: the bytes hash to ${actual} but the source records sha256 ${source.sha256}. ` +
          "The copy was removed; check the source object.",
        { kind: "failed", subject: `${src.uri}/${key}` },
      );
    }
    yield tally.transfer({
      type: "done",
      key,
      size: source.size,
      sha256: actual,
      ...(existing === "replace" ? { replaced: true as const } : {}),
    });
  }
  return tally.report();
}

/** `copyPrefixIter` drained into a report. */
export function copyPrefix(
  src: ObjectStore,
  dst: ObjectStore,
  options: CopyPrefixOptions = {},
): Promise<TransferReport> {
  return drain(copyPrefixIter(src, dst, options));
}
