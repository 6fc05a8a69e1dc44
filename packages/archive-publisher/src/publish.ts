import { rmdir, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { judgeRemoteObject, type RemoteObjectCheck, verifyRemoteFiles } from "@ckpt/archive-reader";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  UPLOADED_MARKER,
  type Destination,
  type FileEntry,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  type UploadedMarker,
  artifactPayloadFiles,
  writeFileAtomic,
  concurrencyOf,
  mapPool,
} from "@ckpt/manifest";
import { type ObjectStore, ObjectStoreError } from "@ckpt/object-store";
import { ArchivePublisherError, kindOf, messageOf } from "./errors.js";
import { inspectLocalArtifact } from "./internal/inspect.js";
import { entryKind, type HashEvent, hashLocal } from "./internal/local.js";
import { DEFAULT_HEAD_CONCURRENCY, DEFAULT_UPLOAD_CONCURRENCY } from "./internal/pool.js";
import { localNoSpace, publishSpaceNeeds, refuseShortfall } from "./internal/space.js";
import {
  ABANDONED_PROBE_AGE_MS,
  createAndConfirm,
  type ListedObject,
  listObjects,
  listSizes,
  probeConditionalCreate,
  readObject,
  storeCall,
  sweepAbandonedProbes,
} from "./internal/remote.js";
import {
  describeProblems,
  type LocalArtifact,
  type PublishPlan,
  planPublish,
  type RemoteState,
} from "./plan.js";
import { drain, withEvents } from "@ckpt/progress";
import { declaredInventory, planRepair, type RepairedObject, readBackArchive } from "./repair.js";

export interface PublishOptions {
  /** After the archive is verified, release the manifest's payload components locally. */
  deleteLocal?: boolean;
  /** HEAD requests in flight when reading and verifying the destination (default 8; clamped to 1..64). */
  headConcurrency?: number;
  /** Payload uploads in flight (default 8; clamped to 1..64). */
  uploadConcurrency?: number;
  /**
   * A publish that writes the archive deletes the conditional-create probes a killed publish left
   * at this prefix once they are this old (default one hour; a live probe lasts seconds).
   */
  abandonedProbeAgeMs?: number;
  /**
   * Decide exactly as a real publish (hash, read the destination, plan, refuse) and stop there:
   * nothing is uploaded, written or released; the report says what would be.
   */
  dryRun?: boolean;
  /**
   * Repair a committed archive instead: read back every object its declaration records and
   * re-upload, from this artifact, those missing or damaged (another size or sha256). Refused
   * unless the destination is committed and declares exactly this artifact's bytes.
   */
  repair?: boolean;
  signal?: AbortSignal;
}

/** What a dry run found a real publish would do. */
export interface PublishDryRun {
  /** Payloads that would be uploaded (none when the archive is adopted or skipped). */
  readonly would_upload: string[];
  /** With `deleteLocal`: the local payload files that would be released, and why. */
  readonly would_remove: { path: string; bytes: number; reason: string }[];
  /** The local manifest would be completed with digests (or converted) first. */
  readonly would_rewrite_manifest: boolean;
}

export type PublishStatus = "published" | "adopted" | "skipped" | "repaired";

/** The outcome of a publish; holds no secret. */
export interface PublishReport {
  status: PublishStatus;
  /** The destination identity the receipt binds (the store's). */
  destination: Destination;
  /** The store URI of the destination. */
  uri: string;
  iteration: number;
  /** Every archived file with size and digest, as declared. */
  inventory: FileEntry[];
  /** Payloads uploaded by this call. */
  uploaded: string[];
  /**
   * Payloads already released before this call (not on disk; the receipt of this destination
   * covers them and the remote copy was verified), relative to the artifact directory.
   */
  released_earlier: string[];
  /** Local payload files released by `deleteLocal`, relative to the artifact directory. */
  removed: string[];
  freed_bytes: number;
  /** The local manifest was rewritten (digests added or a legacy merge manifest converted). */
  manifest_rewritten: boolean;
  /**
   * Present only for a repair: the objects that read back missing or damaged, re-uploaded (for a
   * dry run, to be); empty when the archive was intact.
   */
  repaired?: RepairedObject[];
  /** Present only for a dry run: nothing above was done; this is what would be. */
  dry_run?: PublishDryRun;
}

export type PublishEvent =
  | HashEvent
  | { type: "plan"; action: PublishPlan["action"]; upload: number; uploadBytes: number; present: number }
  | { type: "probes"; removed: string[] }
  | { type: "repair"; checked: number; repair: number; repairBytes: number }
  | { type: "declaration"; status: "created" | "existing" }
  | { type: "upload"; path: string; sent: number; size: number; doneBytes: number; totalBytes: number }
  | { type: "uploaded"; path: string; size: number }
  | { type: "committed"; key: string }
  | { type: "verified"; objects: number }
  | { type: "receipt"; path: string }
  | { type: "removed"; path: string; size: number };

function aborted(signal: AbortSignal | undefined, subject: string): void {
  if (signal?.aborted) {
    throw new ArchivePublisherError("PUBLISH_ABORTED", `publish ${subject}: aborted.`, {
      kind: "failed",
      subject,
    });
  }
}

function conflictRemedy(store: ObjectStore): string {
  return `The archive at ${store.uri} is kept as it is; publish to another destination (another upload prefix or bucket).`;
}

const RELEASED_REMEDY =
  "An artifact cannot be re-published from a released copy: its payloads are gone locally. Nothing was uploaded; " +
  "the manifest and the receipt are kept. Restore the payloads from another copy to publish again.";

/** What can be done about a refusal the planner decided. */
function refusalRemedy(code: Extract<PublishPlan, { action: "refuse" }>["code"], store: ObjectStore): string {
  switch (code) {
    case "PUBLISH_DECLARATION_CONFLICT":
    case "PUBLISH_REMOTE_CONFLICT":
      return conflictRemedy(store);
    case "PUBLISH_PAYLOAD_MISMATCH":
      return (
        "Nothing was written. A released payload is accounted for only by the receipt of the destination it was " +
        "published to: publish there, or restore the payloads first."
      );
    case "PUBLISH_RELEASED_REMOTE_INVALID":
      return RELEASED_REMEDY;
  }
}

/** How a publish runs: the caller's signal and the resolved concurrency. */
interface Run {
  signal: AbortSignal | undefined;
  heads: number;
  uploads: number;
}

/**
 * The destination's records, and what it already holds of the payloads. One listing says which
 * keys exist with which size; only a payload listed with its declared size can already be in
 * place, so only those are HEADed (for their digest): a fresh destination costs one listing, not
 * a HEAD per file. A key listed with another size is recorded with that size (to be replaced).
 */
async function readRemoteState(
  store: ObjectStore,
  local: LocalArtifact,
  run: Run,
): Promise<{ state: RemoteState; listed?: ReadonlyMap<string, ListedObject> }> {
  const { signal } = run;
  const [declaration, manifest] = await Promise.all([
    readObject(store, ARCHIVE_DECLARATION.fileName, signal),
    readObject(store, ARTIFACT_MANIFEST.fileName, signal),
  ]);
  if (manifest !== undefined) {
    return { state: { ...(declaration ? { declaration } : {}), manifest } };
  }
  const listed = await storeCall(store, "list", "", () => listObjects(store, signal));
  const sizeOf = (path: string) => listed.get(path)?.size;
  const payloads = local.files.filter((f) => f.path !== ARTIFACT_MANIFEST.fileName && listed.has(f.path));
  const objects = new Map<string, { size: number; sha256?: string }>();
  const candidates = payloads.filter((f) => sizeOf(f.path) === f.size);
  for (const file of payloads) {
    if (sizeOf(file.path) !== file.size) objects.set(file.path, { size: sizeOf(file.path)! });
  }
  const heads = await mapPool(candidates, run.heads, (file) =>
    storeCall(store, "head", file.path, () => store.head(file.path, signal ? { signal } : {})),
  );
  candidates.forEach((file, i) => {
    const info = heads[i];
    if (info !== undefined) {
      objects.set(file.path, {
        size: info.size,
        ...(info.sha256 === undefined ? {} : { sha256: info.sha256 }),
      });
    }
  });
  return { state: { ...(declaration ? { declaration } : {}), objects }, listed };
}

/** Writes the converted or digest-completed manifest locally, keeping a legacy original beside it. */
async function rewriteLocalManifest(local: LocalArtifact): Promise<void> {
  const legacyPath = join(local.dir, LEGACY_ARTIFACT_MANIFEST_FILE);
  const writes: Array<[string, Uint8Array]> = [];
  if (local.legacyOriginal !== undefined && (await entryKind(legacyPath)) === "absent") {
    writes.push([legacyPath, local.legacyOriginal]);
  }
  writes.push([join(local.dir, ARTIFACT_MANIFEST.fileName), local.manifestBytes]);
  for (const [path, bytes] of writes) {
    try {
      await writeFileAtomic(path, bytes);
    } catch (error) {
      const full = localNoSpace(
        path,
        bytes.byteLength,
        error,
        "Nothing was uploaded and the manifest keeps its previous bytes.",
      );
      if (full !== undefined) throw full;
      throw new ArchivePublisherError("PUBLISH_LOCAL_WRITE_FAILED", `rewrite ${path}: ${messageOf(error)}`, {
        kind: "failed",
        subject: path,
        cause: error,
      });
    }
  }
}

const VERIFY_REMEDY = {
  PUBLISH_REMOTE_VERIFY_FAILED:
    "No receipt was written; the local artifact is kept. Retry if the store was unavailable; re-upload the missing or damaged objects of a committed archive from this artifact with a repair (ckpt artifact publish --repair, the same destination).",
  PUBLISH_DELETE_REFUSED: "Nothing was deleted locally.",
  PUBLISH_RELEASED_REMOTE_INVALID: RELEASED_REMEDY,
} as const;

function verifyFailure(
  store: ObjectStore,
  checks: readonly RemoteObjectCheck[],
  code: keyof typeof VERIFY_REMEDY,
  context: string,
  how: string,
): ArchivePublisherError {
  const problems = checks.filter((o) => o.status !== "ok");
  return new ArchivePublisherError(
    code,
    `${context}: remote verification (${how}) of ${store.uri} failed for ${problems.length} object(s): ` +
      `${describeProblems(problems)}. ${VERIFY_REMEDY[code]}`,
    { kind: "failed", subject: problems[0]!.path },
  );
}

/** HEADs every file: each must be there with its size and sha256 metadata. */
async function verifyRemote(
  store: ObjectStore,
  files: readonly FileEntry[],
  run: Run,
  code: keyof typeof VERIFY_REMEDY,
  context: string,
): Promise<void> {
  const { signal } = run;
  const check = await storeCall(store, "verify", ARTIFACT_MANIFEST.fileName, () =>
    verifyRemoteFiles(store, files, { concurrency: run.heads, ...(signal ? { signal } : {}) }),
  );
  if (!check.ok) throw verifyFailure(store, check.objects, code, context, "HEAD of every object");
}

/**
 * The inventory check after a publish's commit: one listing must show every file with its size.
 * Each of them was HEADed with its size and digest earlier in the same run (a payload right after
 * its upload or, already present, when the state was read; the manifest read back after its
 * create), so this only has to prove that all of them are still there, at the cost of a listing
 * instead of a HEAD per file.
 */
async function confirmListed(store: ObjectStore, files: readonly FileEntry[], run: Run, context: string) {
  const listed = await storeCall(store, "list", "", () => listSizes(store, run.signal));
  const checks = files.map((f) =>
    judgeRemoteObject(
      { path: f.path, size: f.size },
      listed.has(f.path) ? { key: f.path, size: listed.get(f.path)!, metadata: {} } : undefined,
    ),
  );
  if (checks.some((c) => c.status !== "ok")) {
    throw verifyFailure(store, checks, "PUBLISH_REMOTE_VERIFY_FAILED", context, "listing after the commit");
  }
}

/**
 * Uploads `upload`, `run.uploads` at a time and the largest first (so no big file is left to
 * finish alone at the end), each verified by HEAD right after its upload. `doneBytes` of the
 * progress events counts the bytes of all uploads together.
 */
async function uploadPayloads(
  store: ObjectStore,
  local: LocalArtifact,
  upload: readonly FileEntry[],
  emit: (event: PublishEvent) => void,
  run: Run,
): Promise<void> {
  const { signal } = run;
  const totalBytes = upload.reduce((sum, f) => sum + f.size, 0);
  let doneBytes = 0;
  const largestFirst = [...upload].sort((a, b) => b.size - a.size);
  await mapPool(largestFirst, run.uploads, async (file) => {
    aborted(signal, local.dir);
    let counted = 0;
    const source =
      file.path === LEGACY_ARTIFACT_MANIFEST_FILE && local.legacyOriginal !== undefined
        ? local.legacyOriginal
        : { path: join(local.dir, file.path) };
    await storeCall(store, "upload", file.path, () =>
      uploadChecked(store, local, file, source, {
        sha256: file.sha256,
        ...(signal ? { signal } : {}),
        onProgress: (sent) => {
          doneBytes += sent - counted;
          counted = sent;
          emit({ type: "upload", path: file.path, sent, size: file.size, doneBytes, totalBytes });
        },
      }),
    );
    const info = await storeCall(store, "head", file.path, () =>
      store.head(file.path, signal ? { signal } : {}),
    );
    if (info === undefined || info.size !== file.size || info.sha256 !== file.sha256) {
      const seen = info === undefined ? "no object" : `${info.size} bytes, sha256 ${info.sha256 ?? "(none)"}`;
      throw new ArchivePublisherError(
        "PUBLISH_UPLOAD_VERIFY_FAILED",
        `upload ${store.uri}/${file.path}: after the upload the store reports ${seen}, expected ${file.size} bytes, ` +
          `sha256 ${file.sha256}. No receipt was written; retry the publish, and qualify the endpoint if it persists.`,
        { kind: "failed", subject: file.path },
      );
    }
    doneBytes += file.size - counted;
    emit({ type: "uploaded", path: file.path, size: file.size });
  });
}

/**
 * `store.put`, for a payload whose bytes the put checks against the inventory's digest as it
 * reads them: bytes (or a size) other than recorded are the local artifact contradicting its
 * manifest, found only now because its recorded digest was trusted until the upload read it.
 */
async function uploadChecked(
  store: ObjectStore,
  local: LocalArtifact,
  file: FileEntry,
  source: Parameters<ObjectStore["put"]>[1],
  options: Parameters<ObjectStore["put"]>[2],
): Promise<void> {
  try {
    await store.put(file.path, source, options);
  } catch (error) {
    if (!(error instanceof ObjectStoreError && error.code === "STORE_INTEGRITY")) throw error;
    const path = join(local.dir, file.path);
    throw new ArchivePublisherError(
      "PUBLISH_PAYLOAD_MISMATCH",
      `publish ${local.dir}: ${file.path} does not hold the bytes its manifest records (${messageOf(error)}). ` +
        `Nothing of it was stored and the archive is not committed. The declaration at ${store.uri} binds the ` +
        "recorded inventory: restore the payload and publish again (it resumes), or save the step into a new iteration directory.",
      { kind: "refused", subject: path, cause: error },
    );
  }
}

/**
 * Hashes the files whose recorded digest nothing has checked yet (see `LocalArtifact.unverified`):
 * before an adoption or a skip, which upload nothing, so the receipt never vouches for unread bytes.
 */
async function confirmRecorded(
  local: LocalArtifact,
  emit: (event: PublishEvent) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  if (local.unverified.length === 0) return;
  const paths = local.unverified.map((p) => join(local.dir, p));
  const digests = await hashLocal({ files: paths, dirs: [] }, emit, signal);
  for (const file of local.files) {
    if (!local.unverified.includes(file.path)) continue;
    const got = digests.files.get(join(local.dir, file.path))!;
    if (got.size !== file.size || got.sha256 !== file.sha256) {
      throw new ArchivePublisherError(
        "PUBLISH_PAYLOAD_MISMATCH",
        `publish ${local.dir}: ${file.path} has sha256 ${got.sha256} (${got.size} bytes) but its manifest records ` +
          `${file.sha256} (${file.size} bytes). The artifact changed after it was committed; restore the payload, ` +
          "or save the step into a new iteration directory.",
        { kind: "refused", subject: join(local.dir, file.path) },
      );
    }
  }
}

/** Removes now-empty directories from `start` up to (not including) `root`. */
async function removeEmptyDirs(root: string, start: string): Promise<void> {
  let current = start;
  while (current !== root && current.startsWith(`${root}/`)) {
    try {
      await rmdir(current);
    } catch {
      return;
    }
    current = dirname(current);
  }
}

/** The payloads `deleteLocal` releases: only what is still there (an earlier release is gone already). Pure. */
function releasablePayloads(local: LocalArtifact): FileEntry[] {
  return artifactPayloadFiles(local.manifest)
    .filter((f) => !local.absent.includes(f.path))
    .map((f) => local.files.find((e) => e.path === f.path)!);
}

async function releasePayloads(
  store: ObjectStore,
  local: LocalArtifact,
  emit: (event: PublishEvent) => void,
  run: Run,
): Promise<{ removed: string[]; freed: number }> {
  const { signal } = run;
  const payloads = releasablePayloads(local);
  const rehashed = await hashLocal(
    { files: payloads.map((f) => join(local.dir, f.path)), dirs: [] },
    emit,
    signal,
  );
  for (const file of payloads) {
    const now = rehashed.files.get(join(local.dir, file.path))!;
    if (now.size !== file.size || now.sha256 !== file.sha256) {
      throw new ArchivePublisherError(
        "PUBLISH_DELETE_REFUSED",
        `release ${join(local.dir, file.path)}: its bytes changed since they were archived (sha256 ${now.sha256}, archived ${file.sha256}). ` +
          "Nothing was deleted locally; find out what rewrote the artifact.",
        { kind: "refused", subject: join(local.dir, file.path) },
      );
    }
  }
  await verifyRemote(store, payloads, run, "PUBLISH_DELETE_REFUSED", `release ${local.dir}`);
  const removed: string[] = [];
  let freed = 0;
  for (const file of payloads) {
    const path = join(local.dir, file.path);
    try {
      await unlink(path);
    } catch (error) {
      throw new ArchivePublisherError(
        "PUBLISH_LOCAL_WRITE_FAILED",
        `release ${path}: ${messageOf(error)}. Files released so far: ${removed.length}; the archive is intact.`,
        { kind: "failed", subject: path, cause: error },
      );
    }
    await removeEmptyDirs(local.dir, dirname(path));
    removed.push(file.path);
    freed += file.size;
    emit({ type: "removed", path: file.path, size: file.size });
  }
  return { removed, freed };
}

/** The receipt a publish of `local` to `store` writes. Pure. */
function receiptFor(local: LocalArtifact, store: ObjectStore): UploadedMarker {
  return {
    schema: "posttrain.archive-marker.v1",
    kind: "artifact",
    iteration: local.iteration,
    destination: { ...store.identity },
    files: local.files,
  };
}

async function writeReceipt(local: LocalArtifact, store: ObjectStore): Promise<string> {
  const path = join(local.dir, UPLOADED_MARKER.fileName);
  const marker = receiptFor(local, store);
  try {
    await UPLOADED_MARKER.write(path, marker);
  } catch (error) {
    const full = localNoSpace(
      path,
      UPLOADED_MARKER.serialize(marker).byteLength,
      error,
      `The archive at ${store.uri} is complete and verified; only its receipt is missing, and the next run writes it.`,
    );
    if (full !== undefined) throw full;
    throw new ArchivePublisherError("PUBLISH_LOCAL_WRITE_FAILED", `write ${path}: ${messageOf(error)}`, {
      kind: kindOf(error) === "input" ? "failed" : kindOf(error),
      subject: path,
      cause: error,
    });
  }
  return path;
}

/** What a publish of `local` by `plan` reports, given what it did (nothing, for a dry run). Pure. */
function publishReport(
  local: LocalArtifact,
  plan: Exclude<PublishPlan, { action: "refuse" }>,
  store: ObjectStore,
  done: { uploaded: string[]; removed: string[]; freed: number; manifestRewritten: boolean },
): PublishReport {
  return {
    status: plan.action === "publish" ? "published" : plan.action === "adopt" ? "adopted" : "skipped",
    destination: { ...store.identity },
    uri: store.uri,
    iteration: local.iteration,
    inventory: local.files,
    uploaded: done.uploaded,
    released_earlier: local.absent,
    removed: done.removed,
    freed_bytes: done.freed,
    manifest_rewritten: done.manifestRewritten,
  };
}

/** The report of a dry run: what the plan would upload and `deleteLocal` would release. Pure. */
function dryRunReport(
  local: LocalArtifact,
  plan: Exclude<PublishPlan, { action: "refuse" }>,
  store: ObjectStore,
  deleteLocal: boolean,
): PublishReport {
  const release = deleteLocal ? releasablePayloads(local) : [];
  return {
    ...publishReport(local, plan, store, { uploaded: [], removed: [], freed: 0, manifestRewritten: false }),
    dry_run: {
      would_upload: plan.action === "publish" ? plan.upload.map((f) => f.path) : [],
      would_remove: release.map((f) => ({
        path: f.path,
        bytes: f.size,
        reason: `--delete-local: a payload of the archive at ${store.uri}, released once the archive verifies and its bytes still match`,
      })),
      would_rewrite_manifest: local.manifestRewrite,
    },
  };
}

/**
 * A repair of the committed archive at `store` from `local`: the local bytes are hashed and must be
 * those the archive declares (else refused before any write); every declared object is read back,
 * and those missing or damaged are re-uploaded, the manifest last, each verified by HEAD; then the
 * whole archive is verified by HEAD and receipted as a first publish is.
 */
async function runRepair(
  local: LocalArtifact,
  store: ObjectStore,
  options: PublishOptions,
  emit: (event: PublishEvent) => void,
  run: Run,
): Promise<PublishReport> {
  const { signal } = run;
  await confirmRecorded(local, emit, signal);
  const files = await declaredInventory(store, local, signal);
  const checks = await readBackArchive(store, files, run.heads, signal);
  const repaired = planRepair(checks);
  emit({
    type: "repair",
    checked: checks.length,
    repair: repaired.length,
    repairBytes: repaired.reduce((sum, o) => sum + o.size, 0),
  });
  const released = repaired.filter((o) => local.absent.includes(o.path));
  if (released.length > 0) {
    throw new ArchivePublisherError(
      "PUBLISH_RELEASED_REMOTE_INVALID",
      `repair ${store.uri} from ${local.dir}: ${describeProblems(checks.filter((c) => local.absent.includes(c.path)))}, and the local copy was released. ${RELEASED_REMEDY}`,
      { kind: "failed", subject: released[0]!.path },
    );
  }
  const plan = { action: "adopt" } as const;
  const report = (uploaded: string[], removed: string[], freed: number, manifestRewritten: boolean) => ({
    ...publishReport(local, plan, store, { uploaded, removed, freed, manifestRewritten }),
    status: "repaired" as const,
    repaired,
  });
  if (options.dryRun) {
    return {
      ...report([], [], 0, false),
      dry_run: {
        would_upload: repaired.map((o) => o.path),
        would_remove: [],
        would_rewrite_manifest: local.manifestRewrite,
      },
    };
  }
  if (local.manifestRewrite) await rewriteLocalManifest(local);
  const entries = repaired.map((o) => local.files.find((f) => f.path === o.path)!);
  const isManifest = (f: FileEntry) => f.path === ARTIFACT_MANIFEST.fileName;
  // The manifest is the commit record: a damaged one is replaced only once every payload is sound.
  await uploadPayloads(
    store,
    local,
    entries.filter((f) => !isManifest(f)),
    emit,
    run,
  );
  await uploadPayloads(store, local, entries.filter(isManifest), emit, run);
  await verifyRemote(store, local.files, run, "PUBLISH_REMOTE_VERIFY_FAILED", `repair ${store.uri}`);
  emit({ type: "verified", objects: local.files.length });
  emit({ type: "receipt", path: await writeReceipt(local, store) });
  const freed = options.deleteLocal
    ? await releasePayloads(store, local, emit, run)
    : { removed: [], freed: 0 };
  return report(
    entries.map((f) => f.path),
    freed.removed,
    freed.freed,
    local.manifestRewrite,
  );
}

async function runPublish(
  artifactDir: string,
  store: ObjectStore,
  options: PublishOptions,
  emit: (event: PublishEvent) => void,
): Promise<PublishReport> {
  const { signal } = options;
  const run: Run = {
    signal,
    heads: concurrencyOf(options.headConcurrency, DEFAULT_HEAD_CONCURRENCY),
    uploads: concurrencyOf(options.uploadConcurrency, DEFAULT_UPLOAD_CONCURRENCY),
  };
  const local = await inspectLocalArtifact(artifactDir, emit, signal);
  aborted(signal, local.dir);
  if (options.repair) return runRepair(local, store, options, emit, run);
  const { state: remote, listed } = await readRemoteState(store, local, run);
  const plan = planPublish(local, remote, store.identity);
  emit({
    type: "plan",
    action: plan.action,
    upload: plan.action === "publish" ? plan.upload.length : 0,
    uploadBytes: plan.action === "publish" ? plan.upload.reduce((s, f) => s + f.size, 0) : 0,
    present: plan.action === "publish" ? plan.present.length : 0,
  });
  if (plan.action === "refuse") {
    throw new ArchivePublisherError(
      plan.code,
      `publish ${local.dir}: ${plan.reason}. ${refusalRemedy(plan.code, store)}`,
      { kind: plan.code === "PUBLISH_RELEASED_REMOTE_INVALID" ? "failed" : "refused", subject: plan.subject },
    );
  }
  if (options.dryRun) return dryRunReport(local, plan, store, options.deleteLocal === true);
  // Everything this publish will write has a known size: a full disk is refused before any of it.
  await refuseShortfall(
    `publish ${local.dir}`,
    publishSpaceNeeds(
      local,
      plan,
      store.identity,
      UPLOADED_MARKER.serialize(receiptFor(local, store)).byteLength,
    ),
  );
  if (plan.action !== "publish") await confirmRecorded(local, emit, signal);
  if (local.manifestRewrite) await rewriteLocalManifest(local);

  let uploaded: string[] = [];
  if (plan.action === "publish") {
    if (listed !== undefined) {
      const removed = await sweepAbandonedProbes(store, listed, {
        now: new Date(),
        maxAgeMs: options.abandonedProbeAgeMs ?? ABANDONED_PROBE_AGE_MS,
        ...(signal ? { signal } : {}),
      });
      if (removed.length > 0) emit({ type: "probes", removed });
    }
    // Every conditional create below is trusted only once the store has shown it enforces them.
    await probeConditionalCreate(store, signal);
    if (plan.createDeclaration) {
      const outcome = await createAndConfirm(
        store,
        ARCHIVE_DECLARATION.fileName,
        local.declarationBytes,
        signal,
      );
      if (outcome === "different") {
        throw new ArchivePublisherError(
          "PUBLISH_DECLARATION_CONFLICT",
          `publish ${local.dir}: another publish declared a different inventory at the same moment. ${conflictRemedy(store)}`,
          { kind: "refused", subject: ARCHIVE_DECLARATION.fileName },
        );
      }
      emit({ type: "declaration", status: outcome === "created" ? "created" : "existing" });
    } else {
      emit({ type: "declaration", status: "existing" });
    }
    await uploadPayloads(store, local, plan.upload, emit, run);
    uploaded = plan.upload.map((f) => f.path);
    aborted(signal, local.dir);
    const committed = await createAndConfirm(store, ARTIFACT_MANIFEST.fileName, local.manifestBytes, signal);
    if (committed === "different") {
      throw new ArchivePublisherError(
        "PUBLISH_REMOTE_CONFLICT",
        `publish ${local.dir}: another publish committed a different ${ARTIFACT_MANIFEST.fileName} meanwhile. ${conflictRemedy(store)}`,
        { kind: "refused", subject: ARTIFACT_MANIFEST.fileName },
      );
    }
    emit({ type: "committed", key: ARTIFACT_MANIFEST.fileName });
  }

  // A published archive was HEADed file by file in this run: a listing proves it is all still
  // there. An adopted or skipped one is HEADed now (a released artifact against its receipt,
  // which records exactly `local.files`).
  if (plan.action === "publish") await confirmListed(store, local.files, run, `publish ${local.dir}`);
  else {
    await verifyRemote(
      store,
      local.files,
      run,
      local.absent.length > 0 ? "PUBLISH_RELEASED_REMOTE_INVALID" : "PUBLISH_REMOTE_VERIFY_FAILED",
      `publish ${local.dir}`,
    );
  }
  emit({ type: "verified", objects: local.files.length });
  if (plan.action !== "skip") emit({ type: "receipt", path: await writeReceipt(local, store) });

  const released = options.deleteLocal
    ? await releasePayloads(store, local, emit, run)
    : { removed: [], freed: 0 };
  return publishReport(local, plan, store, {
    uploaded,
    removed: released.removed,
    freed: released.freed,
    manifestRewritten: local.manifestRewrite,
  });
}

/**
 * Publishes a committed artifact directory to `store`, which is rooted at the artifact's
 * destination prefix (keys are the artifact's relative paths). Order: declaration (conditional
 * create, proven by read-back) → payloads (each uploaded with its sha256 and verified by HEAD;
 * those already present and verified are skipped) → native manifest last (conditional create) →
 * remote inventory verification (a listing: everything is still there) → local `.uploaded` receipt. A committed identical archive is
 * adopted or skipped; a conflicting one is never overwritten.
 */
export function publishArtifactIter(
  artifactDir: string,
  store: ObjectStore,
  options: PublishOptions = {},
): AsyncGenerator<PublishEvent, PublishReport> {
  return withEvents<PublishEvent, PublishReport>(
    (emit, signal) => runPublish(artifactDir, store, { ...options, signal }, emit),
    options.signal,
  );
}

/** {@link publishArtifactIter} without the events. */
export function publishArtifact(
  artifactDir: string,
  store: ObjectStore,
  options: PublishOptions = {},
  onEvent?: (event: PublishEvent) => void,
): Promise<PublishReport> {
  return drain(publishArtifactIter(artifactDir, store, options), onEvent);
}
