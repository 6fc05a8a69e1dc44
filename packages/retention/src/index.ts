// Public surface of @ckpt/retention: decide what local checkpoint data may be released (pure), and release it.

// --- errors
export { type ErrorKind, RetentionError, type RetentionErrorCode } from "./errors.js";

// --- prune-verified: release published artifacts whose archive is proven
export {
  type AddressedEvidence,
  type ArtifactEvidence,
  type EvidenceField,
  type LocalEntry,
  type ManifestEvidence,
  type PathTarget,
  type PruneKeep,
  type PruneKeepCode,
  type PrunePlan,
  type PruneRemoval,
  type ReceiptEvidence,
  PRUNE_ERROR_CODES,
  PRUNE_KEEP_CODES,
  locateArtifact,
  nextEvidence,
  planPruneVerified,
} from "./prune/plan.js";
export {
  type KeptArtifact,
  type PruneError,
  type PruneEvent,
  type PruneReport,
  type PruneVerifiedOptions,
  type PrunedArtifact,
  type WouldPruneArtifact,
  addressedDestination,
  pruneVerified,
} from "./prune/execute.js";

// --- full-checkpoint retention: policies, planners, executor (never touches checkpoint_artifacts/)
export {
  type BestNOptions,
  type CheckpointEntry,
  type CheckpointInfo,
  type RetentionPolicy,
  type UploadState,
  allOf,
  anyOf,
  bestN,
  everyNSteps,
  keepAll,
  latestN,
} from "./local/policies.js";
export {
  type LocalRetentionOptions,
  type RetentionKeep,
  type RetentionKeepReason,
  type RetentionPlan,
  type RetentionRemoval,
  type RetentionTarget,
  planModelRetention,
  planOptimizerRetention,
} from "./local/plan.js";
export {
  type AppliedRemoval,
  type ApplyRetentionOptions,
  type RetentionApplyError,
  type RetentionApplyEvent,
  type RetentionApplyReport,
  type ScanOptions,
  DELETING_SUFFIX,
  applyRetentionPlan,
  listEntries,
  scanCheckpointRoot,
} from "./local/apply.js";

// --- footprint estimate: bytes per component, per checkpoint and per retention setting (pure)
export {
  type FootprintEstimate,
  type FootprintInput,
  type OptimizerName,
  type RetentionFootprint,
  type StateDType,
  type WeightDType,
  DEFAULT_TRAINING_STATE_BYTES,
  OPTIMIZER_STATES,
  STATE_DTYPE_BYTES,
  WEIGHT_DTYPE_BYTES,
  estimateFootprint,
  parseParamCount,
} from "./estimate/footprint.js";
