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
  defaultPrefixFor,
  targetsFor,
} from "./layout.js";

// --- the manager
export type {
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
export { CheckpointManager } from "./manager.js";
