import { stat } from "node:fs/promises";
import { basename, extname } from "node:path";
import {
  canonicalJson,
  compareCodePoints,
  type HashOptions,
  hashPlannedFiles,
  isAtomicTemporary,
  MATERIALIZED_MARKER,
  MERGE_COMPLETE,
  OVERLAY_SOURCE,
  planDirectory,
  STAGED_RECORD,
  sha256Hex,
  UPLOADED_MARKER,
  VALIDATION_STATE_FILE,
} from "@ckpt/manifest";
import { DiagnosticsError } from "./errors.js";

/** The version of the fingerprint definition below; a change to it is a new version. */
export const FINGERPRINT_SCHEMA = "ckpt.fingerprint.v1";

/**
 * Payload files a fast fingerprint identifies by path and size instead of content: weights and
 * shards, the bulk of a checkpoint. Every other file (configs, tokenizers, indexes, DCP
 * `.metadata`, ckpt records) is hashed in both modes, so metadata edits always change the identity.
 */
export const FAST_FINGERPRINT_EXTENSIONS = [
  ".bin",
  ".ckpt",
  ".distcp",
  ".gguf",
  ".h5",
  ".msgpack",
  ".npy",
  ".npz",
  ".onnx",
  ".pt",
  ".pth",
  ".safetensors",
] as const;

/**
 * Top-level files that are ckpt's bookkeeping about a directory rather than its content, left out
 * of its identity: they say where the bytes came from or went (source paths, destinations, times),
 * so two copies of the same weights would otherwise differ. The archive receipt and the `.tmp` an
 * interrupted receipt writer leaves, the fetch ownership record, the provenance records of
 * materialize-hf and merge, and a full checkpoint's validation state.
 */
export const FINGERPRINT_EXCLUDED_FILES = [
  UPLOADED_MARKER.fileName,
  `${UPLOADED_MARKER.fileName}.tmp`,
  STAGED_RECORD.fileName,
  MATERIALIZED_MARKER.fileName,
  OVERLAY_SOURCE.fileName,
  MERGE_COMPLETE.fileName,
  VALIDATION_STATE_FILE,
] as const;

/** Bookkeeping by path: a top-level record above, or ckpt's atomic-write temporary at any depth. */
function isBookkeeping(path: string, excludedNames: ReadonlySet<string>): boolean {
  return excludedNames.has(path) || isAtomicTemporary(basename(path));
}

export type FingerprintMode = "full" | "fast";

/** One file of a fingerprint: `sha256` absent only for a payload file in fast mode. */
export interface FingerprintFile {
  readonly path: string;
  readonly size: number;
  readonly sha256?: string;
}

export interface DirectoryFingerprint {
  readonly schema: typeof FINGERPRINT_SCHEMA;
  readonly mode: FingerprintMode;
  /** SHA-256 of the canonical JSON `{ files, mode, schema }`: the directory's identity. */
  readonly fingerprint: string;
  /** Every file that counts, sorted by path in code-point order. */
  readonly files: readonly FingerprintFile[];
  /** Files present but left out (FINGERPRINT_EXCLUDED_FILES, atomic-write temporaries). */
  readonly excluded: readonly string[];
  /** Bytes of the counted files, and of those actually hashed. */
  readonly size: number;
  readonly hashed_bytes: number;
}

export interface FingerprintOptions extends HashOptions {
  /** Identify payload files (FAST_FINGERPRINT_EXTENSIONS) by path and size instead of content. */
  readonly fast?: boolean;
}

/** True when a fast fingerprint identifies `path` by size only. */
function isFastPayload(path: string): boolean {
  return (FAST_FINGERPRINT_EXTENSIONS as readonly string[]).includes(extname(path).toLowerCase());
}

/**
 * The identity of an inventory: SHA-256 of `canonicalJson({ files, mode, schema })` with the files
 * sorted by path (code points). Pure; the order `files` come in does not matter.
 */
export function fingerprintOf(files: readonly FingerprintFile[], mode: FingerprintMode): string {
  const sorted = [...files]
    .sort((a, b) => compareCodePoints(a.path, b.path))
    .map(({ path, size, sha256 }) => ({ path, size, sha256 }));
  return sha256Hex(canonicalJson({ files: sorted, mode, schema: FINGERPRINT_SCHEMA }));
}

/**
 * A stable identity for a checkpoint or Hugging Face directory: every regular file below it by
 * relative path, size and SHA-256 (`fast`: payload files by path and size only), bookkeeping
 * records left out, hashed as canonical JSON. Symbolic links to files inside the directory count
 * as those files; a link that leads outside is refused (`PATH_ESCAPES_ROOT`), as is one to a
 * directory (`HASH_SYMLINK_REFUSED`). Anything but a directory is `FINGERPRINT_NOT_A_DIRECTORY`.
 */
export async function fingerprintDirectory(
  dir: string,
  options: FingerprintOptions = {},
): Promise<DirectoryFingerprint> {
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) {
    throw new DiagnosticsError(
      "FINGERPRINT_NOT_A_DIRECTORY",
      `fingerprint ${dir}: ${info === undefined ? "no such directory" : "not a directory"}. ` +
        "Pass the checkpoint's directory (an iter_* directory, an artifact, a Hugging Face model directory).",
      { kind: "input", subject: dir },
    );
  }
  const mode: FingerprintMode = options.fast ? "fast" : "full";
  const listed = await planDirectory(dir, options.signal, "inside");
  const excludedNames = new Set<string>(FINGERPRINT_EXCLUDED_FILES);
  const counted = listed.filter((f) => !isBookkeeping(f.label, excludedNames));
  const toHash = counted.filter((f) => mode === "full" || !isFastPayload(f.label));
  const digests = await hashPlannedFiles(toHash, options, dir);
  const byLabel = new Map(toHash.map((f, i) => [f.label, digests[i]!]));
  const files = counted
    .map((f): FingerprintFile => {
      const digest = byLabel.get(f.label);
      // A hashed file's size is the size read while hashing, so a file that grew is caught.
      return digest === undefined
        ? { path: f.label, size: f.size }
        : { path: f.label, size: digest.size, sha256: digest.sha256 };
    })
    .sort((a, b) => compareCodePoints(a.path, b.path));
  return {
    schema: FINGERPRINT_SCHEMA,
    mode,
    fingerprint: fingerprintOf(files, mode),
    files,
    excluded: listed.filter((f) => isBookkeeping(f.label, excludedNames)).map((f) => f.label),
    size: files.reduce((sum, f) => sum + f.size, 0),
    hashed_bytes: toHash.reduce((sum, f) => sum + f.size, 0),
  };
}
