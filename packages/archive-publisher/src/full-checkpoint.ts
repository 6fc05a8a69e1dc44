import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  compareCodePoints,
  concurrencyOf,
  type Destination,
  hashFile,
  isAtomicTemporary,
  mapPool,
  type SizedFileEntry,
  UPLOADED_MARKER,
  type UploadedMarker,
} from "@ckpt/manifest";
import { type ObjectStore, ObjectStoreError } from "@ckpt/object-store";
import { ArchivePublisherError, kindOf, messageOf } from "./errors.js";
import { iterDirOf } from "./internal/local.js";
import { DEFAULT_UPLOAD_CONCURRENCY } from "./internal/pool.js";
import { listSizes } from "./internal/remote.js";
import { localNoSpace, storeNoSpace } from "./internal/space.js";

/** Where a full-checkpoint upload stands when a store write fails: a rerun skips what is there. */
const FULL_UPLOAD_UNFINISHED = "No receipt was written; the next upload skips the files already stored.";
import { drain, withEvents } from "@ckpt/progress";

export interface UploadFullCheckpointOptions {
  /** Which files (relative paths) to hash; their receipt entries then carry a digest. Default: none. */
  hash?: (path: string) => boolean;
  /**
   * Digests recorded at commit (the checkpoint's description), by relative path. Such a file is
   * not hashed before its upload: the upload re-hashes the bytes as it reads them, once, and a
   * file that no longer matches its record is refused (`PUBLISH_PAYLOAD_MISMATCH`) before the
   * receipt is written. Its receipt entry carries the recorded digest.
   */
  recorded?: ReadonlyMap<string, { readonly size: number; readonly sha256: string }>;
  /** Files hashed and uploaded at once (default 8; clamped to 1..64). */
  concurrency?: number;
  signal?: AbortSignal;
}

export interface FullCheckpointReport {
  destination: Destination;
  uri: string;
  iteration: number;
  /** Every file of the receipt: size, and sha256 where hashed. */
  files: SizedFileEntry[];
  uploaded: string[];
  /** Present remotely with the same size (and digest, when hashed): not uploaded again. */
  skipped: string[];
  uploaded_bytes: number;
}

export type FullCheckpointEvent =
  | { type: "upload"; path: string; sent: number; size: number }
  | { type: "uploaded"; path: string; size: number }
  | { type: "skipped"; path: string; size: number }
  | { type: "receipt"; path: string };

/**
 * Receipt bookkeeping is never uploaded: `.uploaded`, the `.uploaded.tmp` an interrupted writer
 * leaves, and the atomic-write temporaries of `.uploaded` (`..uploaded.tmp-<pid>-<hex>`).
 */
function isReceiptBookkeeping(relative: string): boolean {
  return (
    relative === UPLOADED_MARKER.fileName ||
    relative === `${UPLOADED_MARKER.fileName}.tmp` ||
    (isAtomicTemporary(relative) && relative.startsWith(`.${UPLOADED_MARKER.fileName}.tmp-`))
  );
}

function failure(path: string, error: unknown, what: string): ArchivePublisherError {
  if (error instanceof ArchivePublisherError) return error;
  const kind = kindOf(error);
  return new ArchivePublisherError("FULL_UPLOAD_FAILED", `${what} ${path}: ${messageOf(error)}`, {
    kind: kind === "transient" ? "transient" : "failed",
    subject: path,
    cause: error,
  });
}

/** A file that contradicts the digest its checkpoint recorded at commit. */
function payloadMismatch(
  absolute: string,
  path: string,
  what: string,
  cause?: unknown,
): ArchivePublisherError {
  return new ArchivePublisherError(
    "PUBLISH_PAYLOAD_MISMATCH",
    `upload ${absolute}: ${path} does not hold the bytes its checkpoint description records (${what}). ` +
      "No receipt was written. The checkpoint changed after it was committed: restore it, or save the step again.",
    { kind: "refused", subject: absolute, ...(cause === undefined ? {} : { cause }) },
  );
}

/** Hashes a file whose upload is skipped and refuses it when it no longer matches its record. */
async function confirmRecorded(
  absolute: string,
  path: string,
  sha256: string,
  call: { signal?: AbortSignal },
): Promise<void> {
  const digest = await hashFile(absolute, call);
  if (digest.sha256 !== sha256) {
    throw payloadMismatch(absolute, path, `sha256 ${digest.sha256}, recorded ${sha256}`);
  }
}

async function listFiles(root: string): Promise<Array<{ path: string; size: number }>> {
  const out: Array<{ path: string; size: number }> = [];
  const visit = async (relative: string) => {
    const absolute = relative === "" ? root : join(root, relative);
    let names: string[];
    try {
      names = await readdir(absolute);
    } catch (error) {
      throw failure(absolute, error, "list");
    }
    for (const name of names) {
      const child = relative === "" ? name : `${relative}/${name}`;
      if (relative === "" && isReceiptBookkeeping(name)) continue;
      const info = await lstat(join(root, child)).catch((error: unknown) => {
        throw failure(join(root, child), error, "inspect");
      });
      if (info.isDirectory()) await visit(child);
      else if (info.isFile()) out.push({ path: child, size: info.size });
      else {
        throw new ArchivePublisherError(
          "FULL_UPLOAD_FAILED",
          `upload ${join(root, child)}: it is not a regular file (a symbolic link?); a checkpoint holds only files. Replace it with the file itself.`,
          { kind: "refused", subject: join(root, child) },
        );
      }
    }
  };
  await visit("");
  return out.sort((a, b) => compareCodePoints(a.path, b.path));
}

/** The destination's sizes by key, its failure a FULL_UPLOAD_FAILED naming the store. */
async function remoteSizes(
  store: ObjectStore,
  signal: AbortSignal | undefined,
): Promise<Map<string, number>> {
  try {
    return await listSizes(store, signal);
  } catch (error) {
    throw failure(store.uri, error, "list");
  }
}

async function runUpload(
  iterDir: string,
  store: ObjectStore,
  options: UploadFullCheckpointOptions,
  emit: (event: FullCheckpointEvent) => void,
): Promise<FullCheckpointReport> {
  const { root, iteration } = iterDirOf(
    iterDir,
    "FULL_UPLOAD_NOT_ITER_DIR",
    "upload",
    "Pass a checkpoints/iter_* directory.",
  );
  const signal = options.signal;
  const call = signal ? { signal } : {};
  const listing = await listFiles(root);
  // One listing of the destination tells which files may already be there (same size); only a
  // hashed one of those needs a HEAD, for its digest.
  const listed = listing.length === 0 ? new Map<string, number>() : await remoteSizes(store, signal);
  type Outcome = { entry: SizedFileEntry; uploaded: boolean };
  const outcomes = await mapPool(
    listing,
    concurrencyOf(options.concurrency, DEFAULT_UPLOAD_CONCURRENCY),
    async (file): Promise<Outcome> => {
      const absolute = join(root, file.path);
      const recorded = options.recorded?.get(file.path);
      if (recorded !== undefined && recorded.size !== file.size) {
        throw payloadMismatch(
          absolute,
          file.path,
          `it holds ${file.size} bytes, the record ${recorded.size}`,
        );
      }
      let sha256 = recorded?.sha256;
      if (recorded === undefined && options.hash?.(file.path)) {
        const digest = await hashFile(absolute, call).catch((error: unknown) => {
          throw failure(absolute, error, "hash");
        });
        if (digest.size !== file.size)
          throw failure(absolute, new Error("the file changed while it was listed"), "hash");
        sha256 = digest.sha256;
      }
      const entry: SizedFileEntry = {
        path: file.path,
        size: file.size,
        ...(sha256 === undefined ? {} : { sha256 }),
      };
      try {
        let same = listed.get(file.path) === file.size;
        if (same && sha256 !== undefined) same = (await store.head(file.path, call))?.sha256 === sha256;
        if (same) {
          // A skip reads nothing else of the file: check it against its record before the receipt vouches for it.
          if (recorded !== undefined) await confirmRecorded(absolute, file.path, recorded.sha256, call);
          emit({ type: "skipped", path: file.path, size: file.size });
          return { entry, uploaded: false };
        }
        await store
          .put(
            file.path,
            { path: absolute },
            {
              ...(sha256 === undefined ? {} : { sha256 }),
              ...call,
              onProgress: (sent) => emit({ type: "upload", path: file.path, sent, size: file.size }),
            },
          )
          .catch((error: unknown) => {
            if (
              recorded !== undefined &&
              error instanceof ObjectStoreError &&
              error.code === "STORE_INTEGRITY"
            ) {
              throw payloadMismatch(absolute, file.path, messageOf(error), error);
            }
            throw error;
          });
        emit({ type: "uploaded", path: file.path, size: file.size });
        return { entry, uploaded: true };
      } catch (error) {
        if (error instanceof ObjectStoreError && error.code === "STORE_NO_SPACE") {
          throw storeNoSpace("upload", store.uri, file.path, error, FULL_UPLOAD_UNFINISHED);
        }
        throw failure(`${store.uri}/${file.path}`, error, "upload");
      }
    },
  );
  const files = outcomes.map((o) => o.entry);
  const uploaded = outcomes.filter((o) => o.uploaded).map((o) => o.entry.path);
  const skipped = outcomes.filter((o) => !o.uploaded).map((o) => o.entry.path);
  const uploadedBytes = outcomes.filter((o) => o.uploaded).reduce((sum, o) => sum + o.entry.size, 0);
  if (files.length === 0) {
    throw new ArchivePublisherError(
      "FULL_UPLOAD_FAILED",
      `upload ${root}: the directory holds no files to upload. Save the checkpoint first.`,
      { kind: "refused", subject: root },
    );
  }
  const receipt = join(root, UPLOADED_MARKER.fileName);
  const marker: UploadedMarker = {
    schema: "posttrain.archive-marker.v1",
    kind: "full_checkpoint",
    iteration,
    destination: { ...store.identity },
    files,
  };
  try {
    await UPLOADED_MARKER.write(receipt, marker);
  } catch (error) {
    throw (
      localNoSpace(
        receipt,
        UPLOADED_MARKER.serialize(marker).byteLength,
        error,
        `Every file is uploaded to ${store.uri}; only the receipt is missing, and the next upload writes it (skipping what is there).`,
      ) ?? failure(receipt, error, "write")
    );
  }
  emit({ type: "receipt", path: receipt });
  return {
    destination: { ...store.identity },
    uri: store.uri,
    iteration,
    files,
    uploaded,
    skipped,
    uploaded_bytes: uploadedBytes,
  };
}

/**
 * Uploads every file of a full checkpoint directory (`checkpoints/iter_*`) to `store`, rooted at
 * its destination prefix, `concurrency` files at a time, idempotently: a remote object of the same
 * size (and digest, when the file is hashed) is not uploaded again. Then writes the destination-bound `.uploaded` receipt
 * (kind full_checkpoint). Receipt files are never uploaded. Failures are thrown; the caller
 * decides whether an upload is best-effort.
 */
export function uploadFullCheckpointIter(
  iterDir: string,
  store: ObjectStore,
  options: UploadFullCheckpointOptions = {},
): AsyncGenerator<FullCheckpointEvent, FullCheckpointReport> {
  return withEvents<FullCheckpointEvent, FullCheckpointReport>(
    (emit, signal) => runUpload(iterDir, store, { ...options, signal }, emit),
    options.signal,
  );
}

/** {@link uploadFullCheckpointIter} without the events. */
export function uploadFullCheckpoint(
  iterDir: string,
  store: ObjectStore,
  options: UploadFullCheckpointOptions = {},
  onEvent?: (event: FullCheckpointEvent) => void,
): Promise<FullCheckpointReport> {
  return drain(uploadFullCheckpointIter(iterDir, store, options), onEvent);
}
