// Public surface of @ckpt/archive-publisher: commit an artifact directory, publish it to an
// object store (declaration first, manifest last, receipt after verification), upload full checkpoints.
export {
  ARCHIVE_PUBLISHER_ERROR_CODES,
  ArchivePublisherError,
  type ArchivePublisherErrorCode,
  type ErrorKind,
} from "./errors.js";
export {
  type CommitArtifactOptions,
  type CommitArtifactResult,
  type CommitEvent,
  type ComponentLayout,
  commitArtifact,
  commitArtifactIter,
  normalizeComponents,
  planCommit,
} from "./commit.js";
export {
  type LegacyMergeManifest,
  LEGACY_MERGE_TOOL,
  LEGACY_MERGE_VERSION,
  convertLegacyMergeManifest,
  isLegacyMergeManifest,
  parseLegacyMergeManifest,
} from "./legacy.js";
export {
  type LocalArtifact,
  type PublishPlan,
  type RemoteState,
  type SelectedFile,
  planPublish,
  receiptMatches,
  selectArchiveFiles,
} from "./plan.js";
export {
  type PublishEvent,
  type PublishOptions,
  type PublishDryRun,
  type PublishReport,
  type PublishStatus,
  publishArtifact,
  publishArtifactIter,
} from "./publish.js";
export { type RepairedObject, firstDifference, planRepair } from "./repair.js";
export {
  type FullCheckpointEvent,
  type FullCheckpointReport,
  type UploadFullCheckpointOptions,
  uploadFullCheckpoint,
  uploadFullCheckpointIter,
} from "./full-checkpoint.js";
