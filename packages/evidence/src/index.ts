// Public surface of @ckpt/evidence: the ckpt.evidence.v2 model of a run (what `ckpt evidence`,
// `ckpt mcp` and `ckpt ui` serve) and its closed set of problem codes.

// --- problems: the closed set, what each means and what to do
export {
  explainProblem,
  mappedLibraryCodes,
  PROBLEM_CODES,
  PROBLEMS,
  type ProblemCode,
  problemCodeOf,
  type ProblemDefinition,
  type ProblemSeverity,
} from "./problems.js";

// --- the bundle's schema (validate a bundle you were handed with evidenceSchema.parse) and its parts,
// which the other operator commands' reports carry (a checkpoint entry, an attempt, problems, the tier)
export {
  artifactSchema,
  attemptSchema,
  checkpointSchema,
  EVIDENCE_SCHEMA,
  type Evidence,
  type EvidenceArtifact,
  type EvidenceAttempt,
  type EvidenceCheckpoint,
  type EvidenceProblem,
  type EvidenceStorage,
  evidenceSchema,
  problemSchema,
  storageSchema,
  type VerifyResult,
} from "./schema.js";

// --- building it (read-only, bounded, never throws for what it finds)
export {
  type BuildEvidenceOptions,
  buildEvidence,
  libraryProblem,
  problem,
  problemFromError,
  storageEntry,
  withoutErrors,
} from "./build.js";

// --- does a checkpoint load, and did the job come back where it should? (ckpt drill, ckpt resumed)
export {
  DRILL_SCHEMA,
  type DrillComponent,
  type DrillLoad,
  type DrillOptions,
  type DrillReport,
  drillCheckpoint,
} from "./drill.js";
export {
  checkResumed,
  RESUMED_SCHEMA,
  type ResumedOptions,
  type ResumedReport,
  resumedVerdict,
} from "./resumed.js";
