import { createHash, type Hash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { type FileHandle, lstat, mkdir, open, readdir, rename, rm } from "node:fs/promises";
import { dirname, join, posix } from "node:path";
import {
  ARTIFACT_MANIFEST,
  STAGED_RECORD,
  type CheckpointFormat,
  type Destination,
  fsyncDirectory,
  hashFile,
  ManifestError,
  readOwnership,
  resolveInside,
  removeTemporaries,
  type StagedRecord,
  writeFileAtomic,
  writeFully,
  mapPool,
} from "@ckpt/manifest";
import { type ObjectInfo, type ObjectStore, ObjectStoreError } from "@ckpt/object-store";
import { checkDcpDirectory } from "@ckpt/tensors";
import { ArchiveReaderError } from "../errors.js";
import { EventChannel } from "../internal/channel.js";
import { abortedError } from "../internal/pool.js";
import {
  type FetchPlan,
  type FetchTarget,
  filesToHash,
  type LocalEntry,
  type LocalStageState,
  PART_SUFFIX,
  type PlannedDownload,
  planFetch,
  stagedDirName,
} from "./plan.js";
import { legacyHeadPaths, type RemoteArtifact, readRemoteRecords, resolveRemoteArtifact } from "./remote.js";

export interface FetchOptions {
  readonly signal?: AbortSignal;
  /** The URI as the user wrote it, recorded in `.staged.json` (default: `store.uri`). */
  readonly uri?: string;
  /** Files downloaded at once (default 4). */
  readonly concurrency?: number;
  /** Bytes between two `bytes` events of one file (default 8 MiB; 0 reports every chunk). */
  readonly progressBytes?: number;
  /**
   * A download broken mid-stream (the connection reset or stalled, or the body ended early) is
   * continued in place by a ranged GET from the bytes already in its `.part`, up to this many times
   * in a row without progress (default 5, with a growing pause); then the fetch fails and a rerun
   * resumes. 0 fails at the first break.
   */
  readonly resumeRetries?: number;
  /** Pause before the n-th consecutive resume (default: 200 ms doubling to 5 s, jittered). */
  readonly resumeDelayMs?: (attempt: number) => number;
}

export interface FetchedFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  /** `kept`: already staged and still matching; `resumed`: a `.part` was continued by a ranged GET. */
  readonly action: "downloaded" | "resumed" | "kept";
}

/** What a finished fetch staged. */
export interface FetchReport {
  /** `<dst>/iter_*`: the staged artifact directory. */
  readonly stagedDir: string;
  readonly uri: string;
  readonly destination: Destination;
  readonly iteration: number;
  readonly format: CheckpointFormat;
  readonly manifestSha256: string;
  /** null for a legacy archive without a declaration. */
  readonly declarationSha256: string | null;
  /** The staging was already complete for this source and every file still matched. */
  readonly upToDate: boolean;
  /** Files staged, the native manifest last. */
  readonly files: readonly FetchedFile[];
  /** Files of a previously staged other source that were removed (only those its record named). */
  readonly removed: readonly string[];
  /** Bytes transferred by this run. */
  readonly downloadedBytes: number;
  /** Downloads broken mid-stream and continued in place by a ranged GET during this run. */
  readonly resumedInPlace: number;
}

/** Progress of a fetch. The last event is always `done` with the report. */
export type FetchEvent =
  | {
      readonly type: "remote";
      readonly uri: string;
      readonly iteration: number;
      readonly format: CheckpointFormat;
      readonly declared: boolean;
      readonly files: number;
      readonly bytes: number;
    }
  | {
      readonly type: "plan";
      readonly stagedDir: string;
      readonly keep: number;
      readonly download: number;
      readonly remove: readonly string[];
      /** Bytes this run will transfer (resumed prefixes excluded). */
      readonly bytes: number;
      readonly upToDate: boolean;
    }
  | { readonly type: "file-start"; readonly path: string; readonly size: number; readonly resumeFrom: number }
  | {
      /** A download broke mid-stream; it continues from `from` by a ranged GET after a pause. */
      readonly type: "resume";
      readonly path: string;
      readonly from: number;
      /** Consecutive breaks without progress so far (1-based). */
      readonly attempt: number;
      readonly reason: string;
    }
  | {
      readonly type: "bytes";
      readonly path: string;
      /** Bytes since the previous event of this file. */
      readonly bytes: number;
      /** Bytes transferred by this run so far, over all files. */
      readonly doneBytes: number;
      readonly totalBytes: number;
    }
  | { readonly type: "file-done"; readonly path: string; readonly size: number; readonly sha256: string }
  | { readonly type: "dcp-check"; readonly path: string }
  | { readonly type: "done"; readonly report: FetchReport };

const DEFAULT_PROGRESS_BYTES = 8 * 1024 * 1024;
const DEFAULT_RESUME_RETRIES = 5;

/** Full-jitter backoff before the n-th consecutive resume: up to 200 ms, doubling, at most 5 s. */
function defaultResumeDelay(attempt: number): number {
  return Math.floor(Math.random() * Math.min(5_000, 200 * 2 ** (attempt - 1)));
}

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
/** Files downloaded at once: enough to fill a link with many shards, few enough for small nodes. */
const DEFAULT_DOWNLOAD_CONCURRENCY = 4;
/** Entries scanned below a staging directory; an artifact has at most a few thousand shards. */
const MAX_LOCAL_ENTRIES = 200_000;

function lastSegment(store: ObjectStore): string {
  const { scheme, bucket, prefix } = store.identity;
  return posix.basename(scheme === "file" ? bucket : prefix);
}

/** Reads the remote records (bounded), HEADs a legacy archive's files, and resolves the inventory. */
async function readRemote(
  store: ObjectStore,
  uri: string,
  signal: AbortSignal | undefined,
): Promise<RemoteArtifact> {
  const records = await readRemoteRecords(store, signal);
  const heads = new Map<string, ObjectInfo | undefined>();
  if (records.manifestBytes !== null && records.declarationBytes === null) {
    for (const path of legacyHeadPaths(records.manifestBytes, uri)) {
      heads.set(path, await store.head(path, signal === undefined ? {} : { signal }));
    }
  }
  return resolveRemoteArtifact(uri, records, heads);
}

async function scanLocal(
  stagedDir: string,
): Promise<{ entries: Map<string, LocalEntry>; record: StagedRecord | undefined }> {
  const entries = new Map<string, LocalEntry>();
  let top: Awaited<ReturnType<typeof lstat>>;
  try {
    top = await lstat(stagedDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { entries, record: undefined };
    throw error;
  }
  if (!top.isDirectory()) {
    throw new ArchiveReaderError(
      "READER_STAGE_NOT_DIRECTORY",
      `fetch into ${stagedDir}: it exists and is not a directory. Choose another --dst or move it away.`,
      { kind: "refused", subject: stagedDir },
    );
  }
  // A kill while the ownership record was being written leaves its temporary (writeFileAtomic's
  // name, a writer that is gone): this tool's own file, removed before ownership is judged. Under
  // a record of ours, so is an abandoned temporary of the native manifest (a kill while the
  // staged copy was being completed).
  await removeTemporaries(stagedDir, { target: STAGED_RECORD.fileName });
  // Ours only when the record parses as ours (@ckpt/manifest's ownership rule).
  const { owned } = await readOwnership(stagedDir, STAGED_RECORD.fileName, STAGED_RECORD.parse);
  if (owned) await removeTemporaries(stagedDir, { target: ARTIFACT_MANIFEST.fileName });
  const walk = async (dir: string, rel: string): Promise<void> => {
    for (const dirent of await readdir(dir, { withFileTypes: true })) {
      const path = rel === "" ? dirent.name : `${rel}/${dirent.name}`;
      const full = join(dir, dirent.name);
      if (dirent.isDirectory()) {
        await walk(full, path);
        continue;
      }
      if (entries.size >= MAX_LOCAL_ENTRIES) {
        throw new ArchiveReaderError(
          "READER_STAGE_FOREIGN",
          `fetch into ${stagedDir}: it holds more than ${MAX_LOCAL_ENTRIES} files, more than any artifact. Choose another --dst.`,
          { kind: "refused", subject: stagedDir },
        );
      }
      const info = await lstat(full);
      entries.set(path, { size: info.size, regular: info.isFile() });
    }
  };
  await walk(stagedDir, "");
  const recordEntry = entries.get(STAGED_RECORD.fileName);
  entries.delete(STAGED_RECORD.fileName);
  if (recordEntry === undefined) return { entries, record: undefined };
  try {
    return { entries, record: await STAGED_RECORD.read(join(stagedDir, STAGED_RECORD.fileName)) };
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    throw new ArchiveReaderError(
      "READER_STAGE_RECORD_INVALID",
      `fetch into ${stagedDir}: ${STAGED_RECORD.fileName} is not a valid staging record (${error.message}). ` +
        "ckpt cannot tell which files it owns there; choose another --dst or move the directory away.",
      { kind: "refused", subject: join(stagedDir, STAGED_RECORD.fileName), cause: error },
    );
  }
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

interface DownloadContext {
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
        `fetch ${ctx.uri}: ${file.path} is in the archive's inventory but the object is missing. The archive is damaged; publish the artifact again.`,
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
async function* downloadFile(ctx: DownloadContext, file: PlannedDownload): AsyncGenerator<FetchEvent> {
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
  } finally {
    if (!verified && !state.discard) await handle.sync().catch(() => {});
    await handle.close();
    if (state.discard) await rm(part, { force: true });
  }
  await rename(part, target);
  await fsyncDirectory(dirname(target));
  yield { type: "file-done", path: file.path, size: file.size, sha256: file.sha256 };
}

/** The path of `rel` below the staging directory, refused when a symlink there leads outside it. */
async function insideStage(stagedDir: string, rel: string): Promise<string> {
  try {
    return await resolveInside(stagedDir, rel);
  } catch (error) {
    if (error instanceof ManifestError && error.code === "PATH_ESCAPES_ROOT") {
      throw new ArchiveReaderError(
        "READER_STAGE_FOREIGN",
        `fetch into ${stagedDir}: ${rel} would be written through a symlink leading outside the staging directory (${error.message}). Choose another --dst.`,
        { kind: "refused", subject: rel, cause: error },
      );
    }
    throw error;
  }
}

async function removeOwned(stagedDir: string, paths: readonly string[]): Promise<void> {
  for (const path of paths) await rm(await insideStage(stagedDir, path), { force: true });
  if (paths.length > 0) await fsyncDirectory(stagedDir);
}

/**
 * Fetches the artifact archived in `store` (opened at the artifact's prefix) into `<dst>/iter_*`,
 * yielding progress events; the last is `done` with the {@link FetchReport}.
 *
 * Order: the native manifest and the declaration are read (bounded) and checked against each
 * other; {@link planFetch} decides from them and the local directory; `.staged.json` is written
 * (complete=false) before anything is downloaded; each payload goes through `<path>.part` with
 * size and sha256 checked, then the native manifest, DCP components are checked for every shard
 * their `.metadata` references, and the record is completed last.
 */
export async function* fetchArtifactIter(
  store: ObjectStore,
  dst: string,
  options: FetchOptions = {},
): AsyncGenerator<FetchEvent, void, undefined> {
  const { signal } = options;
  const uri = options.uri ?? store.uri;
  if (signal?.aborted) throw abortedError(`fetch ${uri}`, signal);
  const remote = await readRemote(store, uri, signal);
  const manifestFile = {
    path: ARTIFACT_MANIFEST.fileName,
    size: remote.manifestBytes.length,
    sha256: remote.manifestSha256,
  };
  yield {
    type: "remote",
    uri,
    iteration: remote.iteration,
    format: remote.format,
    declared: remote.declarationSha256 !== null,
    files: remote.payloads.length + 1,
    bytes: remote.payloads.reduce((n, f) => n + f.size, manifestFile.size),
  };
  const stagedDir = join(dst, stagedDirName(lastSegment(store), remote.iteration, uri));
  const target: FetchTarget = {
    source: {
      uri,
      destination: { ...store.identity },
      manifest_sha256: remote.manifestSha256,
      declaration_sha256: remote.declarationSha256,
    },
    iteration: remote.iteration,
    payloads: remote.payloads,
    manifest: manifestFile,
  };
  const scanned = await scanLocal(stagedDir);
  const unhashed: LocalStageState = { stagedDir, ...scanned };
  const entries = new Map(scanned.entries);
  for (const path of filesToHash(target, unhashed)) {
    const digest = await hashFile(
      join(stagedDir, ...path.split("/")),
      signal === undefined ? {} : { signal },
    );
    entries.set(path, { ...entries.get(path)!, sha256: digest.sha256 });
  }
  const plan: FetchPlan = planFetch(target, { stagedDir, entries, record: scanned.record });
  const totalBytes = plan.download.reduce((n, f) => n + f.size - f.resumeFrom, 0);
  yield {
    type: "plan",
    stagedDir,
    keep: plan.keep.length,
    download: plan.download.length,
    remove: plan.remove,
    bytes: totalBytes,
    upToDate: plan.upToDate,
  };
  const files: FetchedFile[] = plan.keep.map((f) => ({ ...f, action: "kept" as const }));
  const ctx: DownloadContext = {
    store,
    uri,
    stagedDir,
    signal,
    progressBytes: options.progressBytes ?? DEFAULT_PROGRESS_BYTES,
    totalBytes,
    resumeRetries: Math.max(0, options.resumeRetries ?? DEFAULT_RESUME_RETRIES),
    resumeDelayMs: options.resumeDelayMs ?? defaultResumeDelay,
    doneBytes: 0,
    resumedInPlace: 0,
  };
  if (!plan.upToDate) {
    await mkdir(stagedDir, { recursive: true });
    const recordPath = join(stagedDir, STAGED_RECORD.fileName);
    // An existing record stops claiming completeness before any of its files is touched.
    if (scanned.record?.complete)
      await STAGED_RECORD.write(recordPath, { ...scanned.record, complete: false });
    await removeOwned(stagedDir, plan.remove);
    await STAGED_RECORD.write(recordPath, plan.record);
    // Downloads run in parallel; their events reach the caller through one channel. Stopping
    // early (an error, or the caller leaving the loop) aborts the downloads still in flight.
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const channel = new EventChannel<FetchEvent>();
    const work: DownloadContext = { ...ctx, signal: stop.signal };
    const done = mapPool(plan.download, options.concurrency ?? DEFAULT_DOWNLOAD_CONCURRENCY, async (file) => {
      if (stop.signal.aborted) throw abortedError(`fetch ${uri}`, stop.signal);
      for await (const event of downloadFile(work, file)) channel.push(event);
    });
    done.then(
      () => channel.close(),
      (error: unknown) => {
        stop.abort(error);
        channel.fail(error);
      },
    );
    try {
      yield* channel.drain();
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (!stop.signal.aborted) stop.abort();
      await done.catch(() => {});
    }
    ctx.doneBytes = work.doneBytes;
    ctx.resumedInPlace = work.resumedInPlace;
    for (const file of plan.download) {
      files.push({
        path: file.path,
        size: file.size,
        sha256: file.sha256,
        action: file.resumeFrom > 0 ? "resumed" : "downloaded",
      });
    }
    for (const dir of remote.dcpDirectories) {
      const check = await checkDcpDirectory(join(stagedDir, ...dir.split("/")));
      if (!check.ok) {
        const problems = check.problems.map((p) => `${dir}/${p.file}: ${p.message}`).join("; ");
        throw new ArchiveReaderError(
          "READER_DCP_INCOMPLETE",
          `fetch ${uri}: the staged DCP component ${dir} is not loadable: ${problems}. The staging stays incomplete; the archive is damaged.`,
          { kind: "refused", subject: dir },
        );
      }
      yield { type: "dcp-check", path: dir };
    }
    if (plan.writeManifest) {
      await writeFileAtomic(join(stagedDir, ARTIFACT_MANIFEST.fileName), remote.manifestBytes, {
        verify: true,
      });
      files.push({ ...manifestFile, action: "downloaded" });
    } else {
      files.push({ ...manifestFile, action: "kept" });
    }
    await STAGED_RECORD.write(recordPath, { ...plan.record, complete: true });
  } else {
    files.push({ ...manifestFile, action: "kept" });
  }
  yield {
    type: "done",
    report: {
      stagedDir,
      uri,
      destination: target.source.destination,
      iteration: remote.iteration,
      format: remote.format,
      manifestSha256: remote.manifestSha256,
      declarationSha256: remote.declarationSha256,
      upToDate: plan.upToDate,
      files,
      removed: plan.remove.filter((p) => !(p === ARTIFACT_MANIFEST.fileName && !plan.replacing)),
      downloadedBytes: ctx.doneBytes,
      resumedInPlace: ctx.resumedInPlace,
    },
  };
}

/** {@link fetchArtifactIter} drained: resolves to the report. */
export async function fetchArtifact(
  store: ObjectStore,
  dst: string,
  options: FetchOptions = {},
): Promise<FetchReport> {
  for await (const event of fetchArtifactIter(store, dst, options)) {
    if (event.type === "done") return event.report;
  }
  throw new Error("fetchArtifactIter ended without a report");
}
