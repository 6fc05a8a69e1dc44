import { messageOf } from "@ckpt/errors";
import type { Stats } from "node:fs";
import { lstat, readdir, realpath, rmdir, stat, unlink } from "node:fs/promises";
import { dirname, join, posix } from "node:path";
import { verifyRemoteFiles } from "@ckpt/archive-reader";
import { ARTIFACT_MANIFEST, UPLOADED_MARKER, fsyncDirectory, hashFiles, ManifestError } from "@ckpt/manifest";
import {
  type DestinationIdentity,
  destinationIdentity,
  formatStoreUri,
  type ObjectStore,
  openStore,
  type StoreCredentials,
} from "@ckpt/object-store";
import { abortedError } from "../internal/abort.js";
import {
  type AddressedEvidence,
  type ArtifactEvidence,
  type EvidenceField,
  type LocalEntry,
  locateArtifact,
  type ManifestEvidence,
  nextEvidence,
  PRUNE_ERROR_CODES,
  type PathTarget,
  type PruneKeepCode,
  planPruneVerified,
  type ReceiptEvidence,
} from "./plan.js";

/** Bookkeeping beside the payload that no receipt lists: the receipt itself and its temporaries. */
function isReceiptFile(relative: string): boolean {
  return (
    relative === UPLOADED_MARKER.fileName ||
    relative === `${UPLOADED_MARKER.fileName}.tmp` ||
    // writeFileAtomic's temporary of the receipt: `.<name>.tmp-<pid>-<hex>`
    relative.startsWith(`.${UPLOADED_MARKER.fileName}.tmp-`)
  );
}

export type PruneEvent =
  | { readonly type: "artifact"; readonly path: string; readonly index: number; readonly total: number }
  | { readonly type: "hash"; readonly path: string; readonly doneBytes: number; readonly totalBytes: number }
  | { readonly type: "verify-remote"; readonly path: string; readonly objects: number }
  | { readonly type: "removed-file"; readonly path: string; readonly file: string; readonly bytes: number }
  | {
      readonly type: "decided";
      readonly path: string;
      readonly outcome: "removed" | "kept";
      readonly code?: PruneKeepCode;
    };

export interface PruneVerifiedOptions {
  /**
   * The credentials whose endpoint the receipts must bind (the seeds' credentials format). Without
   * them the provider defaults apply (s3.amazonaws.com, storage.googleapis.com).
   */
  readonly credentials?: StoreCredentials;
  /** Opens the store at a receipt's destination; default `openStore(<uri>, { credentials })`. */
  readonly openStoreFor?: (destination: DestinationIdentity) => Promise<ObjectStore>;
  readonly signal?: AbortSignal;
  readonly onEvent?: (event: PruneEvent) => void;
  /** Decide as usual but remove nothing: what would go is reported in `would_remove`. */
  readonly dryRun?: boolean;
}

export interface PrunedArtifact {
  readonly path: string;
  readonly artifact_dir: string;
  /** Removed payload files, relative to the artifact directory. */
  readonly files: readonly string[];
  readonly bytes: number;
}

/** An artifact a dry run would release, and why it may be released. */
export interface WouldPruneArtifact extends PrunedArtifact {
  readonly reason: string;
}

export interface KeptArtifact {
  readonly path: string;
  readonly artifact_dir?: string;
  readonly code: PruneKeepCode;
  readonly reason: string;
}

export interface PruneError {
  readonly path: string;
  readonly code: PruneKeepCode;
  readonly message: string;
}

export interface PruneReport {
  readonly removed: readonly PrunedArtifact[];
  readonly kept: readonly KeptArtifact[];
  readonly freed_bytes: number;
  /** Non-empty when the command failed for an artifact (it is also listed in `kept`). */
  readonly errors: readonly PruneError[];
  /** Present only for a dry run: nothing was removed (`removed` is empty, `freed_bytes` 0). */
  readonly dry_run?: true;
  readonly would_remove?: readonly WouldPruneArtifact[];
}

/** Why a removal the plan allows is safe, in the words a dry run reports. */
const PROVEN_ARCHIVE =
  "archive proven: the receipt binds this destination, local digests match it, every remote object is live with its size and digest";

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** A failure of the executor for one artifact: it becomes a keep that is also an error. */
class Stop extends Error {
  constructor(
    readonly code: PruneKeepCode,
    message: string,
  ) {
    super(message);
  }
}

async function targetOf(path: string): Promise<PathTarget> {
  let info: Stats;
  let real: string;
  try {
    info = await stat(path);
    real = await realpath(path);
  } catch (error) {
    if (errnoOf(error) === "ENOENT" || errnoOf(error) === "ENOTDIR") return { type: "missing" };
    throw new Stop("PRUNE_LOCAL_UNREADABLE", `${path}: ${messageOf(error)}. Check permissions.`);
  }
  return { type: info.isDirectory() ? "directory" : info.isFile() ? "file" : "other", realPath: real };
}

async function manifestOf(dir: string): Promise<ManifestEvidence> {
  try {
    return { state: "valid", manifest: await ARTIFACT_MANIFEST.read(join(dir, ARTIFACT_MANIFEST.fileName)) };
  } catch (error) {
    if (error instanceof ManifestError && error.code === "RECORD_NOT_FOUND") return { state: "absent" };
    if (error instanceof ManifestError && error.kind === "input")
      return { state: "invalid", detail: error.message };
    throw new Stop("PRUNE_LOCAL_UNREADABLE", `${dir}: ${messageOf(error)}`);
  }
}

async function receiptOf(dir: string): Promise<ReceiptEvidence> {
  try {
    const read = await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName));
    return read.legacy ? { state: "legacy" } : { state: "valid", marker: read.marker };
  } catch (error) {
    if (error instanceof ManifestError && error.code === "RECORD_NOT_FOUND") return { state: "absent" };
    if (error instanceof ManifestError && error.kind === "input") {
      return {
        state: "invalid",
        detail: error.message,
        missingDigest: error.code === "RECORD_MISSING_DIGEST",
      };
    }
    throw new Stop("PRUNE_LOCAL_UNREADABLE", `${dir}: ${messageOf(error)}`);
  }
}

/** The destination the credentials address at the receipt's scheme, bucket and prefix. Pure. */
export function addressedDestination(
  bound: DestinationIdentity,
  credentials: StoreCredentials | undefined,
): AddressedEvidence {
  try {
    const uri = formatStoreUri({ scheme: bound.scheme, bucket: bound.bucket, prefix: bound.prefix });
    return { ok: true, destination: destinationIdentity(uri, credentials) };
  } catch (error) {
    return { ok: false, detail: messageOf(error) };
  }
}

/** Lists every entry under the artifact directory (receipt files excluded), with the stats deletion re-checks. */
async function listLocal(dir: string): Promise<{ entries: LocalEntry[]; stats: Map<string, Stats> }> {
  const entries: LocalEntry[] = [];
  const stats = new Map<string, Stats>();
  const visit = async (relativeDir: string): Promise<void> => {
    const absoluteDir = relativeDir === "" ? dir : join(dir, relativeDir);
    for (const name of (await readdir(absoluteDir)).sort()) {
      const relative = relativeDir === "" ? name : posix.join(relativeDir, name);
      if (relativeDir === "" && isReceiptFile(relative)) continue;
      const info = await lstat(join(absoluteDir, name));
      if (info.isDirectory()) await visit(relative);
      else {
        entries.push({ path: relative, type: info.isFile() ? "file" : "other", size: info.size });
        stats.set(relative, info);
      }
    }
  };
  try {
    await visit("");
  } catch (error) {
    throw new Stop("PRUNE_LOCAL_UNREADABLE", `${dir}: ${messageOf(error)}. Check permissions.`);
  }
  return { entries, stats };
}

function sameFile(a: Stats, b: Stats): boolean {
  return a.ino === b.ino && a.dev === b.dev && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

/** Removes the payload files, then the component directories they leave empty; fsyncs every directory touched. */
async function removePayload(
  dir: string,
  files: readonly string[],
  stats: ReadonlyMap<string, Stats>,
  onRemoved: (file: string, bytes: number) => void,
): Promise<void> {
  for (const file of files) {
    let now: Stats;
    try {
      now = await lstat(join(dir, file));
    } catch (error) {
      throw new Stop(
        "PRUNE_LOCAL_CHANGED",
        `${join(dir, file)} changed while it was verified: ${messageOf(error)}. Nothing was removed.`,
      );
    }
    if (!sameFile(now, stats.get(file)!)) {
      throw new Stop(
        "PRUNE_LOCAL_CHANGED",
        `${join(dir, file)} changed after it was verified. Nothing was removed; prune again.`,
      );
    }
  }
  const touched = new Set<string>();
  for (const file of files) {
    const absolute = join(dir, file);
    try {
      await unlink(absolute);
    } catch (error) {
      throw new Stop(
        "PRUNE_DELETE_FAILED",
        `remove ${absolute}: ${messageOf(error)}. Check permissions and prune again.`,
      );
    }
    onRemoved(file, stats.get(file)!.size);
    touched.add(dirname(absolute));
  }
  const byDepth = [...touched].sort((a, b) => b.length - a.length);
  for (const d of byDepth) {
    let parent = d;
    while (parent !== dir && parent.startsWith(`${dir}/`)) {
      try {
        await rmdir(parent);
      } catch (error) {
        if (errnoOf(error) === "ENOTEMPTY" || errnoOf(error) === "EEXIST" || errnoOf(error) === "ENOENT")
          break;
        throw new Stop(
          "PRUNE_DELETE_FAILED",
          `remove directory ${parent}: ${messageOf(error)}. Check permissions.`,
        );
      }
      parent = dirname(parent);
      touched.add(parent);
    }
  }
  for (const d of [...touched].sort((a, b) => b.length - a.length)) {
    try {
      await fsyncDirectory(d);
    } catch (error) {
      if (errnoOf((error as { cause?: unknown }).cause) === "ENOENT") continue;
      throw new Stop("PRUNE_DELETE_FAILED", `${messageOf(error)}`);
    }
  }
}

/**
 * Releases the payload files of published artifacts whose archive is proven: gathers the evidence
 * {@link planPruneVerified} asks for (manifest, receipt, destination, local listing, local
 * digests, remote HEADs) one gate at a time, and deletes only the manifest's payload files of the
 * artifacts it removes (manifest, receipt and other records stay), fsyncing every directory it
 * changes. Kept artifacts are not errors, except the codes in `PRUNE_ERROR_CODES`.
 */
export async function pruneVerified(
  paths: readonly string[],
  options: PruneVerifiedOptions = {},
): Promise<PruneReport> {
  const { signal, onEvent } = options;
  const open =
    options.openStoreFor ??
    ((d: DestinationIdentity) =>
      openStore(formatStoreUri({ scheme: d.scheme, bucket: d.bucket, prefix: d.prefix }), {
        ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
      }));
  const removed: PrunedArtifact[] = [];
  const wouldRemove: WouldPruneArtifact[] = [];
  const kept: KeptArtifact[] = [];
  const errors: PruneError[] = [];
  let freed = 0;
  const keepAs = (path: string, code: PruneKeepCode, reason: string, artifactDir?: string) => {
    kept.push({ path, ...(artifactDir === undefined ? {} : { artifact_dir: artifactDir }), code, reason });
    if (PRUNE_ERROR_CODES.has(code)) errors.push({ path, code, message: reason });
    onEvent?.({ type: "decided", path, outcome: "kept", code });
  };

  for (const [index, path] of paths.entries()) {
    if (signal?.aborted) throw abortedError(`prune ${path}`, signal);
    onEvent?.({ type: "artifact", path, index, total: paths.length });
    let artifactDir: string | undefined;
    try {
      let evidence: ArtifactEvidence = { path, target: await targetOf(path) };
      const located = locateArtifact(evidence.target);
      artifactDir = located.ok ? located.dir : undefined;
      let stats = new Map<string, Stats>();
      for (let field = nextEvidence(evidence); field !== undefined; field = nextEvidence(evidence)) {
        if (signal?.aborted) throw abortedError(`prune ${path}`, signal);
        evidence = await gather(evidence, field, artifactDir!, options, open, (s) => {
          stats = s;
        });
      }
      const plan = planPruneVerified([evidence]);
      const keep = plan.keep[0];
      if (keep !== undefined) {
        keepAs(path, keep.code, keep.reason, keep.artifactDir);
        continue;
      }
      const removal = plan.remove[0]!;
      if (options.dryRun) {
        wouldRemove.push({
          path,
          artifact_dir: removal.artifactDir,
          files: removal.files.map((f) => f.path),
          bytes: removal.bytes,
          reason: PROVEN_ARCHIVE,
        });
        continue;
      }
      if (signal?.aborted) throw abortedError(`prune ${path}`, signal);
      const gone: string[] = [];
      let bytes = 0;
      try {
        await removePayload(
          removal.artifactDir,
          removal.files.map((f) => f.path),
          stats,
          (file, size) => {
            gone.push(file);
            bytes += size;
            onEvent?.({ type: "removed-file", path, file, bytes: size });
          },
        );
      } finally {
        freed += bytes;
      }
      removed.push({ path, artifact_dir: removal.artifactDir, files: gone, bytes });
      onEvent?.({ type: "decided", path, outcome: "removed" });
    } catch (error) {
      if (error instanceof Stop) keepAs(path, error.code, error.message, artifactDir);
      else throw error;
    }
  }
  return {
    removed,
    kept,
    freed_bytes: freed,
    errors,
    ...(options.dryRun ? { dry_run: true as const, would_remove: wouldRemove } : {}),
  };
}

async function gather(
  evidence: ArtifactEvidence,
  field: EvidenceField,
  dir: string,
  options: PruneVerifiedOptions,
  open: (d: DestinationIdentity) => Promise<ObjectStore>,
  setStats: (stats: Map<string, Stats>) => void,
): Promise<ArtifactEvidence> {
  const { signal, onEvent } = options;
  const path = evidence.path;
  switch (field) {
    case "manifest":
      return { ...evidence, manifest: await manifestOf(dir) };
    case "receipt":
      return { ...evidence, receipt: await receiptOf(dir) };
    case "addressed": {
      const receipt = evidence.receipt as Extract<ReceiptEvidence, { state: "valid" }>;
      return {
        ...evidence,
        addressed: addressedDestination(receipt.marker.destination, options.credentials),
      };
    }
    case "local": {
      const { entries, stats } = await listLocal(dir);
      setStats(stats);
      return { ...evidence, local: entries };
    }
    case "localDigests": {
      const files = evidence.local!.map((f) => f.path);
      try {
        const digests = await hashFiles(
          files.map((f) => join(dir, f)),
          {
            ...(signal === undefined ? {} : { signal }),
            onProgress: (p) =>
              onEvent?.({ type: "hash", path, doneBytes: p.doneBytes, totalBytes: p.totalBytes }),
          },
        );
        const localDigests: Record<string, string> = {};
        for (const f of files) localDigests[f] = digests.get(join(dir, f))!.sha256;
        return { ...evidence, localDigests };
      } catch (error) {
        if (signal?.aborted) throw abortedError(`prune ${path}`, signal);
        const code =
          error instanceof ManifestError && error.code === "HASH_FILE_CHANGED"
            ? "PRUNE_LOCAL_CHANGED"
            : "PRUNE_LOCAL_UNREADABLE";
        throw new Stop(code, `hash ${dir}: ${messageOf(error)}`);
      }
    }
    case "remote": {
      const receipt = evidence.receipt as Extract<ReceiptEvidence, { state: "valid" }>;
      const files = receipt.marker.files;
      try {
        const store = await open(receipt.marker.destination);
        const remote = await verifyRemoteFiles(store, files, signal === undefined ? {} : { signal });
        onEvent?.({ type: "verify-remote", path, objects: files.length });
        return { ...evidence, remote };
      } catch (error) {
        if (signal?.aborted) throw abortedError(`prune ${path}`, signal);
        throw new Stop(
          "PRUNE_REMOTE_UNREACHABLE",
          `${dir}: the destination could not be checked: ${messageOf(error)} The local copy stays; retry when the store is reachable.`,
        );
      }
    }
  }
}
