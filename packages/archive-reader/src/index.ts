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
