import { mkdir } from "node:fs/promises";
import { join, posix } from "node:path";
import { ARTIFACT_MANIFEST, STAGED_RECORD, hashFile, mapPool, writeFileAtomic } from "@ckpt/manifest";
import type { ObjectInfo, ObjectStore } from "@ckpt/object-store";
import { drain, type LongOperation, withEvents } from "@ckpt/progress";
import { checkDcpDirectory } from "@ckpt/tensors";
import { ArchiveReaderError } from "../errors.js";
import { abortedError, asReaderAbort } from "../internal/pool.js";
import { type DownloadContext, defaultResumeDelay, downloadFile } from "./download.js";
import {
  type FetchPlan,
  type FetchTarget,
  filesToHash,
  type LocalStageState,
  PART_SUFFIX,
  planFetch,
  stagedDirName,
} from "./plan.js";
import { legacyHeadPaths, type RemoteArtifact, readRemoteRecords, resolveRemoteArtifact } from "./remote.js";
import { fetchSpaceNeeded, refuseShortfall, writing } from "./space.js";
import { removeOwnedStageFiles, scanLocal } from "./stage.js";
import type { FetchEvent, FetchedFile, FetchOptions, FetchReport } from "./types.js";

// Fetch orchestration: read the remote records, plan against the staging directory, then write
// the record, download (./download.ts) and complete the record last.

const DEFAULT_PROGRESS_BYTES = 8 * 1024 * 1024;
const DEFAULT_RESUME_RETRIES = 5;
/** Files downloaded at once: enough to fill a link with many shards, few enough for small nodes. */
const DEFAULT_DOWNLOAD_CONCURRENCY = 4;

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

/**
 * Fetches the artifact archived in `store` (opened at the artifact's prefix) into `<dst>/iter_*`,
 * as a long operation: progress events, then the {@link FetchReport} as the return value.
 *
 * Order: the native manifest and the declaration are read (bounded) and checked against each
 * other; {@link planFetch} decides from them and the local directory; `.staged.json` is written
 * (complete=false) before anything is downloaded; each payload goes through `<path>.part` with
 * size and sha256 checked, then the native manifest, DCP components are checked for every shard
 * their `.metadata` references, and the record is completed last.
 */
export function fetchArtifactIter(
  store: ObjectStore,
  dst: string,
  options: FetchOptions = {},
): LongOperation<FetchEvent, FetchReport> {
  return withEvents(
    (emit, signal) =>
      runFetch(store, dst, options, emit, signal).catch((error: unknown) => {
        throw asReaderAbort(error, `fetch ${options.uri ?? store.uri}`);
      }),
    options.signal,
  );
}

/** The fetch itself; `signal` aborts on the caller's abort and when the caller stops reading. */
async function runFetch(
  store: ObjectStore,
  dst: string,
  options: FetchOptions,
  emit: (event: FetchEvent) => void,
  signal: AbortSignal,
): Promise<FetchReport> {
  const uri = options.uri ?? store.uri;
  if (signal.aborted) throw abortedError(`fetch ${uri}`, signal);
  const remote = await readRemote(store, uri, signal);
  const manifestFile = {
    path: ARTIFACT_MANIFEST.fileName,
    size: remote.manifestBytes.length,
    sha256: remote.manifestSha256,
  };
  emit({
    type: "remote",
    uri,
    iteration: remote.iteration,
    format: remote.format,
    declared: remote.declarationSha256 !== null,
    files: remote.payloads.length + 1,
    bytes: remote.payloads.reduce((n, f) => n + f.size, manifestFile.size),
  });
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
    const digest = await hashFile(join(stagedDir, ...path.split("/")), { signal });
    entries.set(path, { ...entries.get(path)!, sha256: digest.sha256 });
  }
  const plan: FetchPlan = planFetch(target, { stagedDir, entries, record: scanned.record });
  const totalBytes = plan.download.reduce((n, f) => n + f.size - f.resumeFrom, 0);
  emit({
    type: "plan",
    stagedDir,
    keep: plan.keep.length,
    download: plan.download.length,
    remove: plan.remove,
    bytes: totalBytes,
    upToDate: plan.upToDate,
  });
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
    const recordPath = join(stagedDir, STAGED_RECORD.fileName);
    const recordBytes = STAGED_RECORD.serialize({ ...plan.record, complete: true }).byteLength;
    // Every size is known: a fetch that cannot fit is refused before anything is written.
    const needed = fetchSpaceNeeded(plan, manifestFile.size, recordBytes, scanned.entries);
    await refuseShortfall(uri, stagedDir, needed);
    const writeRecord = (record: typeof plan.record) =>
      writing(uri, recordPath, recordBytes, () => STAGED_RECORD.write(recordPath, record));
    await writing(uri, stagedDir, needed, () => mkdir(stagedDir, { recursive: true }));
    // An existing record stops claiming completeness before any of its files is touched.
    if (scanned.record?.complete) await writeRecord({ ...scanned.record, complete: false });
    await removeOwnedStageFiles(stagedDir, plan.remove);
    await writeRecord(plan.record);
    // Downloads run in parallel, each reporting through `emit`; an abort (the caller's, or the
    // caller leaving the loop) stops those still in flight.
    await mapPool(plan.download, options.concurrency ?? DEFAULT_DOWNLOAD_CONCURRENCY, async (file) => {
      if (signal.aborted) throw abortedError(`fetch ${uri}`, signal);
      const part = join(stagedDir, `${file.path}${PART_SUFFIX}`);
      await writing(uri, part, file.size - file.resumeFrom, async () => {
        for await (const event of downloadFile(ctx, file)) emit(event);
      });
    });
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
      emit({ type: "dcp-check", path: dir });
    }
    if (plan.writeManifest) {
      const manifestPath = join(stagedDir, ARTIFACT_MANIFEST.fileName);
      await writing(uri, manifestPath, manifestFile.size, () =>
        writeFileAtomic(manifestPath, remote.manifestBytes, { verify: true }),
      );
      files.push({ ...manifestFile, action: "downloaded" });
    } else {
      files.push({ ...manifestFile, action: "kept" });
    }
    await writeRecord({ ...plan.record, complete: true });
  } else {
    files.push({ ...manifestFile, action: "kept" });
  }
  return {
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
  };
}

/** {@link fetchArtifactIter} drained: resolves to the report. */
export function fetchArtifact(
  store: ObjectStore,
  dst: string,
  options: FetchOptions = {},
): Promise<FetchReport> {
  return drain(fetchArtifactIter(store, dst, options));
}
