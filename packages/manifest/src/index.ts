// Public surface of @ckpt/manifest. Each block is owned by one area; add exports in your block.

// --- errors and byte sources
export { ManifestError, type ErrorKind } from "./errors.js";
export { type ByteSource, openFileByteSource, bufferByteSource } from "./byte-source.js";

// --- records, canonical JSON, layout, path safety (src/records, src/layout)
export {
  type JsonValue,
  type StrictJsonOptions,
  MAX_JSON_DEPTH,
  MAX_JSON_TEXT_LENGTH,
  parseStrictJson,
} from "./json/strict.js";

// --- hashing and atomic local writes (src/hash, src/fs)
export {
  type AtomicWriteData,
  type AtomicWriteResult,
  type CommitLastOptions,
  type CommitPayload,
  type RemoveTemporariesOptions,
  type TemporaryFile,
  type WriteFileAtomicOptions,
  commitLast,
  findTemporaries,
  fsyncDirectory,
  fsyncFile,
  removeTemporaries,
  temporaryPathFor,
  writeFileAtomic,
} from "./fs/atomic.js";
export {
  type DirectoryDigest,
  type DirectoryFileDigest,
  hashDirectory,
  hashFile,
  hashFiles,
  sha256Hex,
} from "./hash/hash.js";
export type { FileDigest, HashOptions, HashProgressEvent } from "./hash/engine.js";
