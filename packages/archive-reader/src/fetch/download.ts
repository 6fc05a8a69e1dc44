import { createHash, type Hash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { type FileHandle, mkdir, open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { isNoSpace } from "@ckpt/errors";
import { fsyncDirectory, writeFully } from "@ckpt/manifest";
import { defaultBackoffDelay, type ObjectStore, ObjectStoreError } from "@ckpt/object-store";
import { ArchiveReaderError } from "../errors.js";
import { abortedError } from "../internal/pool.js";
import { PART_SUFFIX, type PlannedDownload } from "./plan.js";
import { noSpaceWriting } from "./space.js";
import { insideStage } from "./stage.js";
import type { FetchEvent } from "./types.js";

// One file's download through `<path>.part`: the resume loop that continues a broken body in
// place by ranged GETs, and the size and digest checks before the rename.

/** Pause before the n-th consecutive resume: the object store's own retry backoff. */
export const defaultResumeDelay = (attempt: number): number => defaultBackoffDelay(attempt);

/** A pause that ends early, with the abort error, when `signal` fires. */
function pause(ms: number, signal: AbortSignal | undefined, subject: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortedError(subject, signal));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(subject, signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

async function hashPrefix(path: string, length: number, hash: Hash): Promise<void> {
  if (length === 0) return;
  for await (const chunk of createReadStream(path, { start: 0, end: length - 1 }))
    hash.update(chunk as Buffer);
}

function mismatch(uri: string, path: string, detail: string, remedy: string): ArchiveReaderError {
  return new ArchiveReaderError("READER_DOWNLOAD_MISMATCH", `fetch ${uri}: ${path} ${detail}. ${remedy}`, {
    kind: "failed",
    subject: path,
  });
}

/** What every download of one fetch shares; the counters are summed over its files. */
export interface DownloadContext {
  readonly store: ObjectStore;
  readonly uri: string;
  readonly stagedDir: string;
  readonly signal: AbortSignal | undefined;
  readonly progressBytes: number;
  readonly totalBytes: number;
  readonly resumeRetries: number;
  readonly resumeDelayMs: (attempt: number) => number;
  doneBytes: number;
  resumedInPlace: number;
}

/** Where a download stands: bytes in the `.part` (all hashed), and whether its bytes are wrong. */
interface DownloadState {
  written: number;
  discard: boolean;
}

/**
 * One GET of `file` from byte `state.written` on, appending to `handle` and `hash` and counting
 * every chunk in `state` as it is written. Returns when the body ends (possibly short of the
 * size); throws the store's error when it breaks, and a mismatch (marking `discard`) when it
 * delivers too much.
 */
async function* streamFrom(
  ctx: DownloadContext,
  file: PlannedDownload,
  handle: FileHandle,
  hash: Hash,
  state: DownloadState,
): AsyncGenerator<FetchEvent> {
  let body: AsyncIterable<Uint8Array>;
  try {
    body = await ctx.store.get(file.path, {
      ...(state.written > 0 ? { range: { start: state.written } } : {}),
      ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
    });
  } catch (error) {
    if (error instanceof ObjectStoreError && error.code === "STORE_NOT_FOUND") {
      throw new ArchiveReaderError(
        "READER_REMOTE_INCOMPLETE",
        `fetch ${ctx.uri}: ${file.path} is in the archive's inventory but the object is missing. The archive is damaged: where the artifact it was published from is still on disk, re-upload its missing or damaged objects with ckpt artifact publish --repair (the same --artifact-dir, --upload-prefix and --bucket), or restore the object from another copy of the archive (ckpt store copy).`,
        { kind: "refused", subject: file.path, cause: error },
      );
    }
    throw error;
  }
  let pending = 0;
  const progress = (): FetchEvent => {
    const event: FetchEvent = {
      type: "bytes",
      path: file.path,
      bytes: pending,
      doneBytes: ctx.doneBytes,
      totalBytes: ctx.totalBytes,
    };
    pending = 0;
    return event;
  };
  for await (const chunk of body) {
    if (ctx.signal?.aborted) throw abortedError(`fetch ${ctx.uri}: ${file.path}`, ctx.signal);
    if (state.written + chunk.byteLength > file.size) {
      state.discard = true;
      throw mismatch(
        ctx.uri,
        file.path,
        `has more than the ${file.size} bytes the inventory records`,
        "The object changed after it was archived; the archive cannot be trusted.",
      );
    }
    await writeFully(handle, chunk);
    hash.update(chunk);
    state.written += chunk.byteLength;
    ctx.doneBytes += chunk.byteLength;
    pending += chunk.byteLength;
    if (pending >= ctx.progressBytes) yield progress();
  }
  if (pending > 0) yield progress();
}

/**
 * Downloads one file through `<path>.part`: continues an earlier `.part` by a ranged GET (its
 * bytes are hashed first, so the digest covers the whole file), checks size while streaming and
 * the digest at the end, fsyncs and renames. A body that breaks (a transient store error) or ends
 * early is continued in place by another ranged GET from the bytes already written, up to
 * `resumeRetries` times in a row without progress; after that the `.part` is kept for the next
 * run. A body that is too long or has another digest is removed.
 */
export async function* downloadFile(ctx: DownloadContext, file: PlannedDownload): AsyncGenerator<FetchEvent> {
  const target = await insideStage(ctx.stagedDir, file.path);
  const part = `${target}${PART_SUFFIX}`;
  await mkdir(dirname(target), { recursive: true });
  yield { type: "file-start", path: file.path, size: file.size, resumeFrom: file.resumeFrom };
  const hash = createHash("sha256");
  let handle: FileHandle;
  if (file.resumeFrom > 0) {
    await hashPrefix(part, file.resumeFrom, hash);
    handle = await open(part, constants.O_WRONLY | constants.O_APPEND | constants.O_NOFOLLOW);
  } else {
    await rm(part, { force: true });
    handle = await open(
      part,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o644,
    );
  }
  // A body that ends or fails early leaves a valid prefix for the next run; wrong bytes are discarded.
  const state: DownloadState = { written: file.resumeFrom, discard: false };
  let verified = false;
  try {
    let breaks = 0;
    for (;;) {
      const from = state.written;
      let broken: unknown;
      try {
        yield* streamFrom(ctx, file, handle, hash, state);
      } catch (error) {
        if (!(error instanceof ObjectStoreError && error.kind === "transient") || ctx.signal?.aborted)
          throw error;
        broken = error;
      }
      if (broken === undefined && state.written === file.size) break;
      breaks = state.written > from ? 1 : breaks + 1;
      const reason =
        broken instanceof Error
          ? broken.message
          : `the body ended after ${state.written} of ${file.size} bytes`;
      if (breaks > ctx.resumeRetries) {
        if (broken !== undefined) throw broken;
        throw mismatch(
          ctx.uri,
          file.path,
          `ended after ${state.written} of ${file.size} bytes`,
          `Run the fetch again; it continues from ${file.path}${PART_SUFFIX}.`,
        );
      }
      ctx.resumedInPlace++;
      yield { type: "resume", path: file.path, from: state.written, attempt: breaks, reason };
      await pause(ctx.resumeDelayMs(breaks), ctx.signal, `fetch ${ctx.uri}: ${file.path}`);
    }
    const digest = hash.digest("hex");
    if (digest !== file.sha256) {
      state.discard = true;
      throw mismatch(
        ctx.uri,
        file.path,
        `has sha256 ${digest}, but the inventory records ${file.sha256}`,
        "The archived bytes are damaged; the file was not staged.",
      );
    }
    await handle.sync();
    verified = true;
  } catch (error) {
    if (!isNoSpace(error)) throw error;
    // A full disk: give the space of the partial file back, and say what is still to write.
    state.discard = true;
    throw noSpaceWriting(ctx.uri, part, file.size - state.written, error);
  } finally {
    if (!verified && !state.discard) await handle.sync().catch(() => {});
    await handle.close();
    if (state.discard) await rm(part, { force: true });
  }
  await rename(part, target);
  await fsyncDirectory(dirname(target));
  yield { type: "file-done", path: file.path, size: file.size, sha256: file.sha256 };
}
