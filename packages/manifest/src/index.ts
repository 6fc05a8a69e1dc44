// Public surface of @ckpt/manifest. Each block is owned by one area; add exports in your block.

// --- errors and byte sources
export { ManifestError, type ErrorKind } from "./errors.js";
export {
  type ByteSource,
  openFileByteSource,
  fileHandleByteSource,
  bufferByteSource,
} from "./byte-source.js";

// --- records, canonical JSON, layout, path safety (src/records, src/layout)
export {
  type JsonValue,
  type StrictJsonOptions,
  MAX_JSON_DEPTH,
  MAX_JSON_TEXT_LENGTH,
  parseStrictJson,
} from "./json/strict.js";
export { canonicalJson, compareCodePoints } from "./json/canonical.js";
export {
  type PathProblem,
  MAX_PATH_SEGMENT_BYTES,
  MAX_RELATIVE_PATH_BYTES,
  assertSafeRelativePath,
  pathProblem,
  resolveInside,
} from "./paths/safe.js";
export {
  type Destination,
  type FileEntry,
  type RecordApi,
  type RecordSchema,
  type SizedFileEntry,
  type ValidationResult,
  MAX_FILE_SIZE,
  MAX_INVENTORY_ENTRIES,
  MAX_ITERATION,
  MAX_RECORD_BYTES,
  MAX_TEXT_LENGTH,
  destinationSchema,
  fileEntrySchema,
  parseRecordBytes,
  readBoundedFile,
  readRecordFile,
  safeRelativePathSchema,
  serializeRecord,
  sha256Schema,
  sizedFileEntrySchema,
  validateRecord,
  writeRecordFile,
} from "./records/common.js";
export {
  ARCHIVE_DECLARATION_FILE,
  ARTIFACT_MANIFEST_FILE,
  CONTROL_MANIFEST_FILE,
  LATEST_CHECKPOINT_FILE,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  MATERIALIZED_MARKER_FILE,
  MERGE_COMPLETE_FILE,
  MULTI_ROLE_SUCCESS_FILE,
  OVERLAY_SOURCE_FILE,
  STAGED_RECORD_FILE,
  UPLOADED_MARKER_FILE,
} from "./records/names.js";
export {
  type ArtifactManifest,
  type CheckpointFormat,
  type LogicalComponent,
  type PhysicalComponent,
  type PhysicalComponentName,
  type PhysicalDirectoryComponent,
  type PhysicalFileComponent,
  ARTIFACT_MANIFEST_RECORD,
  ARTIFACT_MANIFEST_SCHEMA,
  CHECKPOINT_FORMATS,
  LOGICAL_COMPONENTS,
  PHYSICAL_COMPONENTS,
  artifactManifestSchema,
  artifactPayloadFiles,
  logicalComponentOf,
  parseArtifactManifest,
  physicalComponentPath,
  readArtifactManifest,
  serializeArtifactManifest,
  validateArtifactManifest,
} from "./records/artifact-manifest.js";
export {
  type ArchiveDeclaration,
  ARCHIVE_DECLARATION_RECORD,
  ARCHIVE_DECLARATION_SCHEMA,
  archiveDeclarationSchema,
  parseArchiveDeclaration,
  readArchiveDeclaration,
  serializeArchiveDeclaration,
  validateArchiveDeclaration,
} from "./records/archive-declaration.js";
export {
  type UploadedMarker,
  type UploadedMarkerRead,
  MAX_LEGACY_MARKER_BYTES,
  UPLOADED_MARKER_RECORD,
  UPLOADED_MARKER_SCHEMA,
  parseUploadedMarker,
  readUploadedMarker,
  serializeUploadedMarker,
  uploadedMarkerSchema,
  validateUploadedMarker,
} from "./records/uploaded.js";
export {
  type StagedRecord,
  type StagedSource,
  STAGED_RECORD_RECORD,
  STAGED_RECORD_SCHEMA,
  parseStagedRecord,
  readStagedRecord,
  serializeStagedRecord,
  stagedRecordSchema,
  validateStagedRecord,
} from "./records/staged.js";
export {
  type BaseIdentity,
  type MergeComplete,
  type MergeDiagnostics,
  type MergeRequest,
  type SourceFile,
  MAX_ABS_LAM,
  MAX_MERGE_EXPERTS,
  MERGE_COMPLETE_RECORD,
  MERGE_COMPLETE_SCHEMA,
  mergeCompleteSchema,
  mergeRequestSchema,
  parseMergeComplete,
  readMergeComplete,
  serializeMergeComplete,
  validateMergeComplete,
} from "./records/merge-complete.js";
export {
  type ChatTemplateRecord,
  type MaterializeOptions,
  type MaterializedMarker,
  type OverlaySource,
  CURRENT_CONVERSION_VERSION,
  MATERIALIZED_MARKER_RECORD,
  MATERIALIZED_MARKER_SCHEMA,
  OVERLAY_SOURCE_RECORD,
  OVERLAY_SOURCE_SCHEMA,
  materializedMarkerSchema,
  overlaySourceSchema,
  parseMaterializedMarker,
  parseOverlaySource,
  readMaterializedMarker,
  readOverlaySource,
  serializeMaterializedMarker,
  serializeOverlaySource,
  validateMaterializedMarker,
  validateOverlaySource,
} from "./records/materialized.js";
export {
  type ControlManifest,
  type DcpComponent,
  CONTROL_MANIFEST_RECORD,
  CONTROL_MANIFEST_SCHEMA,
  DCP_COMPONENTS,
  controlGenerationDir,
  controlManifestSchema,
  parseControlManifest,
  readControlManifest,
  serializeControlManifest,
  validateControlManifest,
} from "./records/control-manifest.js";
export {
  type LoopStateValue,
  type MultiRoleSuccess,
  MULTI_ROLE_SUCCESS_RECORD,
  MULTI_ROLE_SUCCESS_SCHEMA,
  multiRoleSuccessSchema,
  parseMultiRoleSuccess,
  readMultiRoleSuccess,
  serializeMultiRoleSuccess,
  validateMultiRoleSuccess,
} from "./records/success.js";
export {
  type LatestPointer,
  parseLatestPointer,
  readLatestPointer,
  serializeLatestPointer,
} from "./records/latest-pointer.js";
export {
  ITER_DIR_DIGITS,
  ITER_DIR_PREFIX,
  formatIterDir,
  parseIterDir,
  requireIterDir,
} from "./layout/iter.js";
export { type RunTs, assertRunTs, formatRunTs, isRunTs, mintRunTs, parseRunTs } from "./layout/run-ts.js";
export {
  type CheckpointRootKind,
  type IterPathInfo,
  type RunAttempt,
  CHECKPOINTS_DIR,
  CHECKPOINT_ARTIFACTS_DIR,
  artifactPrefixFor,
  artifactsPrefixFor,
  checkpointPrefixFor,
  checkpointRootDir,
  classifyIterPath,
  defaultCheckpointPrefix,
  runAttemptDir,
  runAttemptPrefix,
} from "./layout/prefixes.js";

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
export { WRITE_SLICE_BYTES, writeFully } from "./fs/write-fully.js";
export { compareFileRanges, type RangeComparison, type RangePair } from "./fs/compare-ranges.js";
export {
  type DirectoryDigest,
  type DirectoryFileDigest,
  hashDirectory,
  hashFile,
  hashFiles,
  sha256Hex,
} from "./hash/hash.js";
export type { FileDigest, HashOptions, HashProgressEvent } from "./hash/engine.js";
export {
  type DirectoryFingerprint,
  type FingerprintFile,
  type FingerprintMode,
  type FingerprintOptions,
  FAST_FINGERPRINT_EXTENSIONS,
  FINGERPRINT_EXCLUDED_FILES,
  FINGERPRINT_SCHEMA,
  fingerprintDirectory,
  fingerprintOf,
  isFastPayload,
} from "./hash/fingerprint.js";

// --- storage qualification: how a volume behaves under ckpt's commit sequence (src/fs/storage-probe)
export {
  type MountEntry,
  type ProbeFilesystem,
  type ProbeStep,
  type ProbeStepName,
  type ProbeStorageOptions,
  type StorageProbeReport,
  type VolumeTier,
  VOLUME_TIER_PROMISES,
  classifyFilesystem,
  mountOf,
  parseMountInfo,
  probeStorage,
  readBackInChildProcess,
  storageVerdict,
} from "./fs/storage-probe.js";

// --- an exclusive lock directory that names its holder (src/fs/holder-lock)
export {
  type HeldLock,
  type LockDirectoryOptions,
  type LockHolder,
  type LockOutcome,
  LOCK_HOLDER_FILE,
  describeLockHolder,
  lockDirectory,
  readLockHolder,
} from "./fs/holder-lock.js";

// --- a directory built beside its final path and swapped in whole (src/fs/staged-directory)
export {
  type Ownership,
  type PathKind,
  type RemoveOwnedOptions,
  type StagedPaths,
  type SwapIo,
  type SwapRecovery,
  decideSwapRecovery,
  pathInfo,
  pathKind,
  readOwnership,
  recoverSwap,
  removeOwnedDirectory,
  renameDurably,
  swapIntoPlace,
} from "./fs/staged-directory.js";

// --- bounded concurrency shared by the archive packages
export { MAX_CONCURRENCY, concurrencyOf, mapPool } from "./concurrency.js";

// --- a worker thread started from source text (src/worker)
export { type SourceWorker, type SourceWorkerEnd, startSourceWorker } from "./worker/source-worker.js";
