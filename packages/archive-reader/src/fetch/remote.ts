import { createHash } from "node:crypto";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  type ArchiveDeclaration,
  type ArtifactManifest,
  artifactPayloadFiles,
  type CheckpointFormat,
  MAX_RECORD_BYTES,
  ManifestError,
} from "@ckpt/manifest";
import { type ObjectInfo, type ObjectStore, ObjectStoreError } from "@ckpt/object-store";
import { ArchiveReaderError } from "../errors.js";

/** A file a fetch stages, with the size and digest it must have. */
export interface StagedFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
}

/** What the remote archive holds, as far as a fetch is concerned. */
export interface RemoteArtifact {
  readonly iteration: number;
  readonly format: CheckpointFormat;
  readonly manifest: ArtifactManifest;
  readonly manifestBytes: Uint8Array;
  readonly manifestSha256: string;
  /** Digest of the declaration's bytes; null for a legacy archive without one. */
  readonly declarationSha256: string | null;
  /** The model-component payloads to stage (never the manifest, the merge or legacy records, a diagnostic). */
  readonly payloads: readonly StagedFile[];
  /** Directory components (relative paths) whose shards a DCP check covers once staged. */
  readonly dcpDirectories: readonly string[];
}

/** The records a fetch reads before deciding anything, as raw bytes (null: no such object). */
export interface RemoteRecords {
  readonly manifestBytes: Uint8Array | null;
  readonly declarationBytes: Uint8Array | null;
}

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

/**
 * GETs one record object, refusing it once it passes `MAX_RECORD_BYTES` (64 MiB: the manifest
 * package's cap for every record) without buffering more. `null` when the object does not exist.
 */
async function readRemoteRecord(
  store: ObjectStore,
  key: string,
  signal?: AbortSignal,
): Promise<Uint8Array | null> {
  let body: AsyncIterable<Uint8Array>;
  try {
    body = await store.get(key, signal === undefined ? {} : { signal });
  } catch (error) {
    if (error instanceof ObjectStoreError && error.code === "STORE_NOT_FOUND") return null;
    throw error;
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (total > MAX_RECORD_BYTES) {
      throw new ArchiveReaderError(
        "READER_REMOTE_RECORD_TOO_LARGE",
        `read ${store.uri}/${key}: the object is larger than ${MAX_RECORD_BYTES} bytes, the limit for a record. It is not a ckpt record.`,
        { kind: "refused", subject: key },
      );
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** GETs the native manifest and the declaration, each bounded. */
export async function readRemoteRecords(store: ObjectStore, signal?: AbortSignal): Promise<RemoteRecords> {
  const manifestBytes = await readRemoteRecord(store, ARTIFACT_MANIFEST.fileName, signal);
  const declarationBytes = await readRemoteRecord(store, ARCHIVE_DECLARATION.fileName, signal);
  return { manifestBytes, declarationBytes };
}

function invalidRecord(uri: string, key: string, error: unknown): ArchiveReaderError {
  const detail = error instanceof Error ? error.message : String(error);
  return new ArchiveReaderError(
    "READER_REMOTE_RECORD_INVALID",
    `read ${uri}/${key}: ${detail} The archive is damaged or was not written by ckpt; fetch refuses it.`,
    { kind: "refused", subject: key, cause: error },
  );
}

function parseRemote<T>(
  parse: (bytes: Uint8Array, name: string) => T,
  bytes: Uint8Array,
  uri: string,
  key: string,
): T {
  try {
    return parse(bytes, `${uri}/${key}`);
  } catch (error) {
    if (error instanceof ManifestError) throw invalidRecord(uri, key, error);
    throw error;
  }
}

function mismatch(uri: string, message: string, subject: string): ArchiveReaderError {
  return new ArchiveReaderError(
    "READER_DECLARATION_MISMATCH",
    `fetch ${uri}: ${message} The declaration and the manifest contradict each other; the archive cannot be trusted.`,
    { kind: "refused", subject },
  );
}

/** Whether a component must be proved by a declared inventory (a directory of shards). */
const isDirectory = (c: ArtifactManifest["physical_components"][number]) => c.kind === "dir";

/**
 * Decides what a fetch must stage from the records' bytes, and for a legacy archive (no
 * declaration) from the HEADs of its files. Pure.
 *
 * With a declaration, it is the inventory of record: every file of the manifest's physical
 * components must be declared with a size (and a digest, when the manifest has one) that agrees,
 * and the declared size and digest are what the download is checked against; whether the object
 * is in a listing does not matter. Declared files outside the components (merge and legacy
 * records, a diagnostic) are not staged. Without a declaration, a directory component is refused
 * (a listing cannot prove every shard is there) and each file needs a digest from its descriptor
 * or its object metadata.
 */
export function resolveRemoteArtifact(
  uri: string,
  records: RemoteRecords,
  legacyHeads: ReadonlyMap<string, ObjectInfo | undefined> = new Map(),
): RemoteArtifact {
  if (records.manifestBytes === null) {
    throw new ArchiveReaderError(
      "READER_REMOTE_INCOMPLETE",
      `fetch ${uri}: there is no ${ARTIFACT_MANIFEST.fileName}. The archive is unfinished (the manifest is uploaded last) or the URI names no artifact; publish it again or check the URI.`,
      { kind: "refused", subject: ARTIFACT_MANIFEST.fileName },
    );
  }
  const manifest = parseRemote(
    ARTIFACT_MANIFEST.parse,
    records.manifestBytes,
    uri,
    ARTIFACT_MANIFEST.fileName,
  );
  const manifestSha256 = sha256(records.manifestBytes);
  const described = artifactPayloadFiles(manifest);
  const dcpDirectories = manifest.physical_components
    .filter(
      (c) => c.kind === "dir" && (manifest.format === "dcp" || c.files.some((f) => f.path === ".metadata")),
    )
    .map((c) => c.path);
  const base = {
    iteration: manifest.iteration,
    format: manifest.format,
    manifest,
    manifestBytes: records.manifestBytes,
    manifestSha256,
    dcpDirectories,
  };

  if (records.declarationBytes !== null) {
    const declaration: ArchiveDeclaration = parseRemote(
      ARCHIVE_DECLARATION.parse,
      records.declarationBytes,
      uri,
      ARCHIVE_DECLARATION.fileName,
    );
    if (
      declaration.manifest_sha256 !== manifestSha256 ||
      declaration.manifest_size !== records.manifestBytes.length
    ) {
      throw mismatch(
        uri,
        `the declaration binds a manifest of ${declaration.manifest_size} bytes with sha256 ${declaration.manifest_sha256}, but ${ARTIFACT_MANIFEST.fileName} is ${records.manifestBytes.length} bytes with sha256 ${manifestSha256}.`,
        ARTIFACT_MANIFEST.fileName,
      );
    }
    const declared = new Map(declaration.files.map((f) => [f.path, f]));
    const payloads = described.map((file): StagedFile => {
      const entry = declared.get(file.path);
      if (entry === undefined) throw mismatch(uri, `component file ${file.path} is not declared.`, file.path);
      if (entry.size !== file.size || (file.sha256 !== undefined && file.sha256 !== entry.sha256)) {
        throw mismatch(
          uri,
          `${file.path} is declared as ${entry.size} bytes with sha256 ${entry.sha256}, but the manifest describes ${file.size} bytes${file.sha256 === undefined ? "" : ` with sha256 ${file.sha256}`}.`,
          file.path,
        );
      }
      return { path: file.path, size: entry.size, sha256: entry.sha256 };
    });
    return { ...base, declarationSha256: sha256(records.declarationBytes), payloads };
  }

  const directory = manifest.physical_components.find(isDirectory);
  if (directory !== undefined) {
    throw new ArchiveReaderError(
      "READER_LEGACY_DCP_UNPROVABLE",
      `fetch ${uri}: the archive has no ${ARCHIVE_DECLARATION.fileName} and component ${directory.name} is a directory of shards; ` +
        "without a declared inventory nothing proves every shard is present. Publish the local artifact again to a new destination.",
      { kind: "refused", subject: directory.path },
    );
  }
  const payloads = described.map((file): StagedFile => {
    const head = legacyHeads.get(file.path);
    if (head === undefined) {
      throw new ArchiveReaderError(
        "READER_REMOTE_INCOMPLETE",
        `fetch ${uri}: ${file.path} is described by the manifest but missing from the archive.`,
        { kind: "refused", subject: file.path },
      );
    }
    const digest = file.sha256 ?? head.sha256;
    if (digest === undefined) {
      throw new ArchiveReaderError(
        "READER_UNVERIFIABLE",
        `fetch ${uri}: ${file.path} has no sha256 in its manifest descriptor or in its object metadata, so its bytes cannot be verified. ` +
          "Publish the local artifact again to a new destination.",
        { kind: "refused", subject: file.path },
      );
    }
    if (head.size !== file.size || (head.sha256 !== undefined && head.sha256 !== digest)) {
      throw new ArchiveReaderError(
        "READER_DOWNLOAD_MISMATCH",
        `fetch ${uri}: ${file.path} is ${head.size} bytes${head.sha256 === undefined ? "" : ` with sha256 ${head.sha256}`} in the archive, but the manifest describes ${file.size} bytes with sha256 ${digest}.`,
        { kind: "refused", subject: file.path },
      );
    }
    return { path: file.path, size: file.size, sha256: digest };
  });
  return { ...base, declarationSha256: null, payloads };
}

/** The payload paths a legacy archive needs HEADs for (its manifest read already). Pure. */
export function legacyHeadPaths(manifestBytes: Uint8Array, uri: string): string[] {
  const manifest = parseRemote(ARTIFACT_MANIFEST.parse, manifestBytes, uri, ARTIFACT_MANIFEST.fileName);
  if (manifest.physical_components.some(isDirectory)) return [];
  return artifactPayloadFiles(manifest).map((f) => f.path);
}
