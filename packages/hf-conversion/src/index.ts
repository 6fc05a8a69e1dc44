// Public surface of @ckpt/hf-conversion: turn a consolidated model.pt into a verified Hugging Face directory.
export {
  type ErrorKind,
  type HfConversionErrorCode,
  type MaterializeStage,
  HfConversionError,
} from "./errors.js";

// --- checking a Hugging Face weights directory (also used by `ckpt verify`)
export {
  type HfDirectoryProblem,
  type HfDirectoryProblemCode,
  type HfDirectoryReport,
  type HfShardReport,
  HF_DIRECTORY_PROBLEM_CODES,
  checkHfDirectory,
} from "./check/hf-directory.js";

// --- the base, read alone before anything is written
export {
  type BasePreflight,
  type BaseTensor,
  type SidecarFile,
  MAX_SIDECAR_TEXT_BYTES,
  preflightBase,
} from "./preflight/base.js";
export {
  type CanonicalTemplate,
  canonicalTemplate,
  REASONING_CLOSE,
  REASONING_OPEN,
} from "./preflight/reasoning-template.js";
export {
  type UnifiedTemplatePlan,
  oneHunkDiff,
  planUnifiedTemplates,
} from "./preflight/templates.js";

// --- key accounting and expert layout rules (pure)
export {
  type ExpertLayoutRule,
  type ExpertTensorGroup,
  type MatrixOrientation,
  BUILTIN_EXPERT_RULES,
  compileRule,
  elementIndex,
} from "./plan/rules.js";
export {
  type ConversionPlan,
  type LayoutShard,
  type LayoutTensor,
  type OutputShard,
  type OutputTensor,
  type PlanOptions,
  type RuleInstance,
  type SourceTensor,
  type TensorRecipe,
  type TiedAlias,
  planConversion,
} from "./plan/mapping.js";

// --- what is at the output, and what a request does with it (pure)
export {
  type MaterializeDecision,
  type OutputStates,
  type Recovery,
  type RequestIdentity,
  type TreeState,
  decideMaterialize,
  identityDifferences,
} from "./materialize/decide.js";

// --- the materializer
export type { VerifyReport } from "./verify/verify.js";
export { LOCK_STALE_MS } from "./materialize/lock.js";
export type { LoaderCheckRecord } from "./materialize/loader-check.js";
export {
  type MaterializeEvent,
  type MaterializeReport,
  type MaterializeRequest,
  type MaterializeSource,
  DEFAULT_LOCK_WAIT_SECONDS,
  DEFAULT_MIN_TENSORS,
  resolveMaterializeOptions,
} from "./materialize/options.js";
export {
  type MaterializeDryRun,
  dryRunMaterializeHf,
  materializeHf,
  materializeHfIter,
} from "./materialize/materialize.js";
