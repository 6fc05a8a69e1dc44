// Public surface of @ckpt/verify: judge local checkpoints, artifacts, stages, DCP and Hugging Face directories against their own records.
export { VerifyError, type VerifyErrorCode } from "./errors.js";
export {
  type Expectation,
  type ExpectationJudgement,
  type LocalProblem,
  type LocalProblemCode,
  type Observation,
  LOCAL_PROBLEM_CODES,
  judgeExpectations,
} from "./judge.js";
export { detectVerifyKind, VERIFY_KINDS, type VerifyKind } from "./kind.js";
export {
  type LocalVerifyEvent,
  type LocalVerifyKind,
  type LocalVerifyOptions,
  type LocalVerifyReport,
  verifyArtifactDir,
  verifyCheckpointDir,
  verifyMaterializedDir,
  verifyStagedDir,
} from "./local.js";
export {
  type VerifyPathOptions,
  type VerifyProblem,
  type VerifyReport,
  VERIFY_REPORT_PROBLEM_CODES,
  verifyPath,
} from "./report.js";
