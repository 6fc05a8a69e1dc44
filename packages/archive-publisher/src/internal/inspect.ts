import { basename, join } from "node:path";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  MERGE_COMPLETE,
  UPLOADED_MARKER,
  type ArtifactManifest,
  compareCodePoints,
  type FileEntry,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  type MergeComplete,
  type PhysicalComponent,
  type UploadedMarkerRead,
  readBoundedFile,
  sha256Hex,
} from "@ckpt/manifest";
import { ArchivePublisherError, kindOf, messageOf } from "../errors.js";
import { convertLegacyMergeManifest, isLegacyMergeManifest, parseLegacyMergeManifest } from "../legacy.js";
import { type LocalArtifact, selectArchiveFiles } from "../plan.js";
import { sameBytes } from "./bytes.js";
import { entryInfo, entryKind, type HashEvent, hashLocal, iterDirOf, listTree } from "./local.js";

/**
 * `read(path)`, or undefined when nothing is there. A failure is `code`, its message
 * `<context>: <cause>`, its kind `input` when the cause's is, else `failed`.
 */
async function readIfPresent<T>(
  path: string,
  read: (path: string) => Promise<T>,
  code: "PUBLISH_LOCAL_READ_FAILED" | "PUBLISH_MANIFEST_INVALID",
  context: string,
): Promise<T | undefined> {
  if ((await entryKind(path)) === "absent") return undefined;
  try {
    return await read(path);
  } catch (error) {
    throw new ArchivePublisherError(code, `${context}: ${messageOf(error)}`, {
      kind: kindOf(error) === "input" ? "input" : "failed",
      subject: path,
      cause: error,
    });
  }
}

const readOptional = (path: string) =>
  readIfPresent(path, readBoundedFile, "PUBLISH_LOCAL_READ_FAILED", `read ${path}`);

function mismatch(dir: string, path: string, problem: string): ArchivePublisherError {
  return new ArchivePublisherError(
    "PUBLISH_PAYLOAD_MISMATCH",
    `publish ${dir}: ${path} ${problem}, contradicting its record. The artifact changed after it was committed; ` +
      "restore the payload, or save the step into a new iteration directory.",
    { kind: "refused", subject: join(dir, path) },
  );
}

interface ManifestRead {
  manifest: ArtifactManifest;
  originalBytes: Uint8Array;
  legacyOriginal?: Uint8Array;
}

async function readManifest(dir: string): Promise<ManifestRead> {
  const path = join(dir, ARTIFACT_MANIFEST.fileName);
  const bytes = await readOptional(path);
  if (bytes === undefined) {
    throw new ArchivePublisherError(
      "PUBLISH_NOT_COMMITTED",
      `publish ${dir}: it has no ${ARTIFACT_MANIFEST.fileName}, so it is not a committed artifact. ` +
        "Commit it first (`ckpt artifact commit`), once every payload is written.",
      { kind: "refused", subject: path },
    );
  }
  if (isLegacyMergeManifest(bytes)) {
    const legacy = parseLegacyMergeManifest(bytes, path);
    const preserved = await readOptional(join(dir, LEGACY_ARTIFACT_MANIFEST_FILE));
    if (preserved !== undefined && !sameBytes(preserved, bytes)) {
      throw new ArchivePublisherError(
        "PUBLISH_LEGACY_CONFLICT",
        `publish ${dir}: ${ARTIFACT_MANIFEST.fileName} is a legacy merge manifest, but ${LEGACY_ARTIFACT_MANIFEST_FILE} ` +
          "already holds other bytes; converting would lose one of them. Inspect both and keep the right one.",
        { kind: "refused", subject: join(dir, LEGACY_ARTIFACT_MANIFEST_FILE) },
      );
    }
    return { manifest: convertLegacyMergeManifest(legacy), originalBytes: bytes, legacyOriginal: bytes };
  }
  try {
    return { manifest: ARTIFACT_MANIFEST.parse(bytes, path), originalBytes: bytes };
  } catch (error) {
    throw new ArchivePublisherError("PUBLISH_MANIFEST_INVALID", `publish ${dir}: ${messageOf(error)}`, {
      kind: "input",
      subject: path,
      cause: error,
    });
  }
}

const readMerge = (dir: string): Promise<MergeComplete | undefined> =>
  readIfPresent(
    join(dir, MERGE_COMPLETE.fileName),
    MERGE_COMPLETE.read,
    "PUBLISH_MANIFEST_INVALID",
    `publish ${dir}`,
  );

/** The local receipt, or undefined when absent or unreadable (a publish then writes a fresh one). */
async function readReceipt(dir: string): Promise<UploadedMarkerRead | undefined> {
  const path = join(dir, UPLOADED_MARKER.fileName);
  if ((await entryKind(path)) !== "file") return undefined;
  try {
    return await UPLOADED_MARKER.read(path);
  } catch {
    return undefined;
  }
}

/**
 * Reads everything a publish selects that is on disk and checks every payload against its manifest
 * (size, a directory's exact file list, and the digest of every file hashed now), hashes what no
 * record gives a digest for (then fills those digests in) and builds the declaration. Files whose
 * recorded digest was not checked against their bytes are listed in `unverified`. A payload that is not on disk is listed in `absent` with the entry
 * its manifest records (it must record a digest); whether a receipt covers it is the planner's
 * decision. Touches nothing.
 */
export async function inspectLocalArtifact(
  artifactDir: string,
  emit: (event: HashEvent) => void,
  signal: AbortSignal | undefined,
): Promise<LocalArtifact> {
  const { root: dir, iteration } = iterDirOf(
    artifactDir,
    "PUBLISH_NOT_ITER_DIR",
    "publish",
    "Pass a checkpoint_artifacts/iter_* directory.",
    "PUBLISH_FULL_CHECKPOINT",
  );
  const read = await readManifest(dir);
  if (read.manifest.iteration !== iteration) {
    throw new ArchivePublisherError(
      "PUBLISH_MANIFEST_INVALID",
      `publish ${dir}: ${ARTIFACT_MANIFEST.fileName} records iteration ${read.manifest.iteration}, but the directory is ${basename(dir)}. ` +
        "The manifest belongs to another step; do not publish it from here.",
      { kind: "input", subject: join(dir, ARTIFACT_MANIFEST.fileName) },
    );
  }
  const mergeComplete = await readMerge(dir);
  const legacyManifest =
    read.legacyOriginal !== undefined ||
    (await entryKind(join(dir, LEGACY_ARTIFACT_MANIFEST_FILE))) === "file";
  const selected = selectArchiveFiles(read.manifest, {
    legacyManifest,
    ...(mergeComplete === undefined ? {} : { mergeComplete }),
  });

  // What is there: file components and records as files, directory components as whole trees
  // (so a shard on disk that the manifest does not list is seen). A payload that is not there
  // (released by an earlier publish) is listed in `absent`; the planner decides whether the
  // receipt covers it. A missing record, or anything that is not a regular file, is a contradiction.
  const dirComponents = read.manifest.physical_components.filter((c) => c.kind === "dir");
  const onDisk = new Map<string, number>();
  for (const f of selected) {
    if (f.role === "manifest" || (f.role === "legacy-manifest" && read.legacyOriginal !== undefined))
      continue;
    if (dirComponents.some((c) => f.path.startsWith(`${c.path}/`))) continue;
    const entry = await entryInfo(join(dir, f.path));
    if (entry.kind === "file") onDisk.set(f.path, entry.size);
    else if (entry.kind !== "absent" || f.role !== "payload")
      throw mismatch(dir, f.path, entry.kind === "absent" ? "is missing" : "is not a regular file");
  }
  for (const c of dirComponents) {
    const kind = (await entryInfo(join(dir, c.path))).kind;
    if (kind === "absent") continue;
    if (kind !== "dir") throw mismatch(dir, `${c.path}/`, "is not a directory");
    const listed = new Set(c.files.map((f) => f.path));
    for (const file of await listTree(join(dir, c.path))) {
      if (!listed.has(file.path))
        throw mismatch(dir, `${c.path}/${file.path}`, "exists but is not listed in the manifest");
      onDisk.set(`${c.path}/${file.path}`, file.size);
    }
  }

  // Hash what no record gives a digest for. A payload whose manifest records its digest is only
  // checked for size here: its bytes are checked against that digest as they are uploaded (one
  // read instead of two), or by `confirmRecorded` when nothing is uploaded. With payloads
  // released, everything present is hashed now: the planner holds it against the receipt.
  const released = selected.some((f) => f.role === "payload" && !onDisk.has(f.path));
  const toHash: string[] = [];
  const unverified: string[] = [];
  for (const f of selected) {
    const size = onDisk.get(f.path);
    if (size === undefined) continue;
    if (f.size !== undefined && size !== f.size) {
      throw mismatch(dir, f.path, `is ${size} bytes but recorded as ${f.size}`);
    }
    if (f.sha256 === undefined || released) toHash.push(f.path);
    else unverified.push(f.path);
  }
  const digests = await hashLocal({ files: toHash.map((p) => join(dir, p)), dirs: [] }, emit, signal);
  const actual = new Map<string, { size: number; sha256: string }>();
  for (const path of toHash) actual.set(path, digests.files.get(join(dir, path))!);
  const recordedDigest = new Map(selected.map((f) => [f.path, f.sha256]));
  for (const path of unverified)
    actual.set(path, { size: onDisk.get(path)!, sha256: recordedDigest.get(path)! });

  const files: FileEntry[] = [];
  const absent: string[] = [];
  let digestsAdded = false;
  for (const f of selected) {
    if (f.role === "manifest") continue;
    if (f.role === "legacy-manifest" && read.legacyOriginal !== undefined) {
      files.push({
        path: f.path,
        size: read.legacyOriginal.byteLength,
        sha256: sha256Hex(read.legacyOriginal),
      });
      continue;
    }
    const got = actual.get(f.path);
    if (got === undefined) {
      // Only payloads get here absent. Their inventory entry is what the manifest records.
      if (f.size === undefined || f.sha256 === undefined) {
        throw mismatch(dir, f.path, "is missing and its manifest records no digest for it");
      }
      const recorded = { size: f.size, sha256: f.sha256 };
      actual.set(f.path, recorded);
      absent.push(f.path);
      files.push({ path: f.path, ...recorded });
      continue;
    }
    if (f.sha256 !== undefined && got.sha256 !== f.sha256) {
      throw mismatch(dir, f.path, `has sha256 ${got.sha256} but is recorded as ${f.sha256}`);
    }
    if (f.role === "payload" && f.sha256 === undefined) digestsAdded = true;
    files.push({ path: f.path, size: got.size, sha256: got.sha256 });
  }

  const manifest = withDigests(read.manifest, actual);
  const manifestRewrite = digestsAdded || read.legacyOriginal !== undefined;
  const manifestBytes = manifestRewrite ? ARTIFACT_MANIFEST.serialize(manifest) : read.originalBytes;
  files.push({
    path: ARTIFACT_MANIFEST.fileName,
    size: manifestBytes.byteLength,
    sha256: sha256Hex(manifestBytes),
  });
  files.sort((a, b) => compareCodePoints(a.path, b.path));
  let declarationBytes: Uint8Array;
  try {
    declarationBytes = ARCHIVE_DECLARATION.serialize({
      schema: ARCHIVE_DECLARATION.version,
      manifest_sha256: sha256Hex(manifestBytes),
      manifest_size: manifestBytes.byteLength,
      files,
    });
  } catch (error) {
    // e.g. a merge diagnostic recorded under a payload's or a bookkeeping file's name
    throw new ArchivePublisherError(
      "PUBLISH_MANIFEST_INVALID",
      `publish ${dir}: the selected files do not form a valid archive inventory: ${messageOf(error)}`,
      { kind: "input", subject: dir, cause: error },
    );
  }
  const receipt = await readReceipt(dir);
  return {
    dir,
    iteration,
    manifest,
    manifestBytes,
    manifestRewrite,
    ...(read.legacyOriginal === undefined ? {} : { legacyOriginal: read.legacyOriginal }),
    files,
    absent,
    unverified,
    declarationBytes,
    ...(receipt === undefined ? {} : { receipt }),
  };
}

function withDigests(
  manifest: ArtifactManifest,
  actual: ReadonlyMap<string, { size: number; sha256: string }>,
): ArtifactManifest {
  return {
    ...manifest,
    physical_components: manifest.physical_components.map(
      (c): PhysicalComponent =>
        c.kind === "file"
          ? { ...c, sha256: actual.get(c.path)!.sha256 }
          : {
              ...c,
              files: c.files.map((f) => ({ ...f, sha256: actual.get(`${c.path}/${f.path}`)!.sha256 })),
            },
    ),
  };
}
