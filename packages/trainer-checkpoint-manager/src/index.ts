// Public surface of @ckpt/trainer-checkpoint-manager: configuration, pure deciders (plans, targets,
// attempts, resume) and the CheckpointManager executor that commits what the trainer wrote.

// --- errors
export { type ErrorKind, MANAGER_ERROR_CODES, ManagerError, type ManagerErrorCode } from "./errors.js";

// --- configuration (pure)
export {
  DEFAULT_LEASE_SECONDS,
  FULL_PLAN,
  type ManagerConfig,
  type StoreSettings,
  configWarnings,
  isFullPlan,
  parseManagerConfig,
  runEmergencyPlan,
} from "./config.js";

// --- save plans (pure)
export {
  type SaveDue,
  type SavePlan,
  type SaveReason,
  type StepCoverage,
  type ValidationMode,
  cadenceDue,
  covers,
  planSave,
} from "./plan.js";

// --- layout and attempts (pure)
export {
  type AttemptDecision,
  type AttemptInputs,
  type ComponentTargets,
  type LayoutKind,
  type SaveTargets,
  type TargetOptions,
  decideAttempt,
  refuseLegacyFresh,
  defaultPrefixFor,
  targetsFor,
} from "./layout.js";

// --- resume decision (pure) and the writer lease decision (pure)
export {
  type ChangedFiles,
  type PointerState,
  type ProbedCheckpoint,
  type ResumeInputs,
  decideResume,
  probeFindings,
} from "./resume/decide.js";
// read-only probes of an attempt on disk: the inputs decideResume takes (ckpt run status, ckpt resumable)
export {
  iterationFromPath,
  listCommittedArtifacts,
  localCheckpointsRoot,
  type ProbeOptions,
  probeLocalCheckpoint,
  readLocalPointer,
} from "./resume/local.js";
export { type LeaseDecision, type LeaseHolder, decideLease } from "./remote/lease.js";
export { retentionCandidates } from "./archive.js";

// --- records this package writes (schemas validated through @ckpt/manifest)
export {
  CHECKPOINT_DESCRIPTION_FILE,
  CHECKPOINT_DESCRIPTION_RECORD,
  LEASE_PREFIX,
  LEASE_RECORD,
  LEASE_SCHEMA,
  type LeaseRecord,
  VALIDATION_STATE_FILE,
  VALIDATION_STATE_RECORD,
  VALIDATION_STATE_SCHEMA,
  type ValidationRecord,
  leaseKey,
  validationPublicationName,
} from "./records.js";

// the log of the process windows that used a run attempt (ckpt evidence reads it)
export {
  type AttemptWindow,
  type AttemptWindowsRecord,
  readAttemptWindows,
  WINDOWS_FILE,
  WINDOWS_RECORD,
  WINDOWS_SCHEMA,
} from "./windows.js";

// --- termination watch
export { SENTINEL_FILE, sentinelPathFor } from "./termination.js";

// --- the manager
export type {
  CheckpointLocation,
  CommitOptions,
  CommitReport,
  ManagerEvent,
  OpenOptions,
  PublicationReport,
  ResumeCheckpoint,
  ResumeComponents,
  ResumeDecision,
  ResumeFresh,
  RetentionOutcome,
  SaveOutcome,
  SaveSession,
  StopReason,
  TerminationOptions,
  UploadOutcome,
  ValidationState,
} from "./types.js";
export { CheckpointManager, MANAGER_VERSION } from "./manager.js";
export {
  type ArtifactEvidence,
  type CollectOptions,
  collectEvidence,
  type EvidenceBundle,
  type EvidenceProblem,
} from "./evidence.js";
// --- a run attempt at a glance (ckpt run status), read-only
export {
  type ArtifactStatus,
  archivedTo,
  artifactLocality,
  type CheckpointStatus,
  type ComponentStatus,
  type RunStatusOptions,
  type RunStatusReport,
  runStatus,
} from "./status.js";
// --- would training resume from this checkpoint? (ckpt resumable), read-only
export { checkResumable, type ResumableReport } from "./resumable.js";
