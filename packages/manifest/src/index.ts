// Public surface of @ckpt/manifest: what other packages and library users need. Each block is
// owned by one area; names used only inside the package stay in their modules.

// --- errors and byte sources
export { ManifestError } from "./errors.js";
export {
  type ByteSource,
  openFileByteSource,
  fileHandleByteSource,
  bufferByteSource,
} from "./byte-source.js";

// --- strict and canonical JSON, path safety (src/json, src/paths)
export { type JsonValue, parseStrictJson } from "./json/strict.js";
export { canonicalJson, compareCodePoints } from "./json/canonical.js";
export { isInside, type PathProblem, pathProblem, resolveInside } from "./paths/safe.js";

// --- records: one object per record (`ARTIFACT_MANIFEST.read(path)`, `.parse`, `.serialize`,
// `.validate`, `.write`, `.schema`, `.fileName`, `.version`), built by `recordApi` (src/records)
export {
  type Destination,
  type FileEntry,
  type RecordApi,
  type RecordSchema,
  type SizedFileEntry,
  MAX_RECORD_BYTES,
  readBoundedFile,
  recordApi,
} from "./records/common.js";
export { LEGACY_ARTIFACT_MANIFEST_FILE, VALIDATION_STATE_FILE } from "./records/names.js";
export {
  type ArtifactManifest,
  type CheckpointFormat,
  type LogicalComponent,
  type PhysicalComponent,
  type PhysicalComponentName,
  ARTIFACT_MANIFEST,
  CHECKPOINT_DESCRIPTION,
  CHECKPOINT_DESCRIPTION_FILE,
  CHECKPOINT_FORMATS,
  LOGICAL_COMPONENTS,
  PHYSICAL_COMPONENTS,
  artifactPayloadFiles,
  logicalComponentName,
  logicalComponentOf,
  physicalComponentPath,
} from "./records/artifact-manifest.js";
export {
  type InventoryTensor,
  type TensorListSummary,
  canonicalTensorList,
  MAX_COMPONENT_TENSORS,
  tensorListDigest,
} from "./records/tensor-list.js";
export { type TensorInventory, TENSOR_INVENTORY } from "./records/tensor-inventory.js";
export { type ArchiveDeclaration, ARCHIVE_DECLARATION } from "./records/archive-declaration.js";
export { type UploadedMarker, type UploadedMarkerRead, UPLOADED_MARKER } from "./records/uploaded.js";
export { type StagedRecord, type StagedSource, STAGED_RECORD } from "./records/staged.js";
export {
  type BaseIdentity,
  type MergeComplete,
  type MergeRequest,
  type SourceFile,
  MAX_ABS_LAM,
  MAX_MERGE_EXPERTS,
  MERGE_COMPLETE,
} from "./records/merge-complete.js";
export {
  type MaterializeOptions,
  type MaterializedMarker,
  type OverlaySource,
  CURRENT_CONVERSION_VERSION,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
} from "./records/materialized.js";
export {
  type ControlManifest,
  type DcpComponent,
  CONTROL_MANIFEST,
  DCP_COMPONENTS,
  controlGenerationDir,
} from "./records/control-manifest.js";
export { type LoopStateValue, type MultiRoleSuccess, MULTI_ROLE_SUCCESS } from "./records/success.js";
export { type LatestPointer, LATEST_POINTER } from "./records/latest-pointer.js";

// --- layout names (src/layout)
export { formatIterDir, parseIterDir } from "./layout/iter.js";
export { formatRunTs, isRunTs, parseRunTs } from "./layout/run-ts.js";
export {
  CHECKPOINTS_DIR,
  CHECKPOINT_ARTIFACTS_DIR,
  artifactPrefixFor,
  checkpointPrefixFor,
  classifyIterPath,
  defaultCheckpointPrefix,
  runAttemptDir,
} from "./layout/prefixes.js";

// --- hashing and atomic local writes (src/hash, src/fs)
export {
  commitLast,
  fsyncDirectory,
  fsyncFile,
  isAtomicTemporary,
  removeTemporaries,
  writeFileAtomic,
} from "./fs/atomic.js";
export { WRITE_SLICE_BYTES, writeFully } from "./fs/write-fully.js";
export { compareFileRanges, type RangePair } from "./fs/compare-ranges.js";
export {
  type DirectoryDigest,
  hashDirectory,
  hashFile,
  hashFiles,
  planDirectory,
  sha256Hex,
} from "./hash/hash.js";
export {
  type FileDigest,
  type HashOptions,
  type HashProgressEvent,
  type PlannedFile,
  hashPlannedFiles,
} from "./hash/engine.js";

// --- an exclusive lock directory that names its holder (src/fs/holder-lock)
export {
  type HeldLock,
  type LockHolder,
  type LockHolderState,
  describeLockHolder,
  holdsOnlyLockRecord,
  isProcessAlive,
  judgeLockHolder,
  LOCK_HOLDER_FILE,
  lockDirectory,
  readLockHolder,
  removeLockOfDeadHolder,
} from "./fs/holder-lock.js";

// --- a directory built beside its final path and swapped in whole (src/fs/staged-directory)
export {
  type Ownership,
  type PathKind,
  type StagedPaths,
  type SwapIo,
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
export { concurrencyOf, mapPool } from "./concurrency.js";

// --- a worker thread started from source text (src/worker)
export { type SourceWorker, type SourceWorkerEnd, startSourceWorker } from "./worker/source-worker.js";
