// Public surface of @ckpt/merge: plan, decide and run a streaming expert merge.
export { type ErrorKind, MergeError, type MergeErrorCode } from "./errors.js";
export {
  DEFAULT_DIAGNOSTICS_FILE,
  type DiagnosticsTarget,
  MERGE_MODEL_FILE,
  MERGE_MODES,
  MERGE_TOOL_VERSION,
  type MergeMode,
  type MergeOptions,
  type ResolvedMergeRequest,
  resolveMergeRequest,
} from "./request.js";
export {
  type InputListing,
  MERGEABLE_DTYPES,
  type MergePlan,
  type PlannedTensor,
  type TensorListing,
  planMerge,
} from "./plan.js";
export {
  type CompletionRead,
  type DecisionInput,
  type ManifestRead,
  type MergeDecision,
  type OutputFacts,
  type OutputState,
  type RecordRead,
  type RequestedIdentity,
  checkIntact,
  classifyOutput,
  compareRequests,
  decideMerge,
  mergeOwnedNames,
} from "./decide.js";
export {
  type DeltaDiagnostics,
  MERGE_DIAGNOSTICS_SCHEMA,
  type MergeDiagnosticsFile,
  type TensorDiagnostics,
} from "./diagnostics.js";
export {
  type MergeEvent,
  type MergeReport,
  type MergeRunOptions,
  dryRunMerge,
  type MergeDryRun,
  mergeExperts,
  mergeExpertsIter,
} from "./merge.js";
