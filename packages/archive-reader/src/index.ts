// Public surface of @ckpt/archive-reader: verify an archive by HEAD, fetch it into an owned staging directory.
export { ArchiveReaderError, type ArchiveReaderErrorCode, type ErrorKind } from "./errors.js";
export {
  type ExpectedRemoteFile,
  type RemoteInventoryCheck,
  type RemoteObjectCheck,
  type RemoteObjectStatus,
  type VerifyRemoteOptions,
  describeRemoteCheck,
  judgeRemoteObject,
  verifyRemoteFiles,
} from "./verify/remote.js";
export {
  type VerifyProblem,
  type VerifyReceiptOptions,
  type VerifyReport,
  readReceipt,
  verifyReceipt,
} from "./verify/receipt.js";
export { fetchArtifact, fetchArtifactIter } from "./fetch/fetch.js";
export type { FetchedFile, FetchEvent, FetchOptions, FetchReport } from "./fetch/types.js";
export {
  type FetchPlan,
  type FetchTarget,
  type LocalEntry,
  type LocalStageState,
  type PlannedDownload,
  PART_SUFFIX,
  filesToHash,
  ownedStagePaths,
  planFetch,
  sameSource,
  stagedDirName,
} from "./fetch/plan.js";
export { removeOwnedStageFiles } from "./fetch/stage.js";
export {
  type RemoteArtifact,
  type RemoteRecords,
  type StagedFile,
  readRemoteRecords,
  resolveRemoteArtifact,
} from "./fetch/remote.js";
