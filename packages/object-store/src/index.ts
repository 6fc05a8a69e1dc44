// Public surface of @ckpt/object-store.
export type {
  DestinationIdentity,
  ObjectInfo,
  CallOptions,
  PutOptions,
  PutBody,
  GetOptions,
  ListOptions,
  CreateResult,
  IncompleteUpload,
  ObjectStore,
  StoreCredentials,
  StoreRetryOptions,
} from "./types.js";
export {
  ObjectStoreError,
  isTransientStoreError,
  type ObjectStoreErrorCode,
  type ErrorKind,
} from "./errors.js";

// --- uri parsing, credentials, openStore, backends, qualify (added by their owners)
export { parseStoreUri, formatStoreUri, type StoreUri, type StoreScheme } from "./uri.js";
export {
  loadCredentials,
  parseCredentials,
  destinationIdentity,
  sameDestination,
  DEFAULT_S3_ENDPOINT,
  DEFAULT_GCS_ENDPOINT,
  MAX_CREDENTIALS_BYTES,
} from "./credentials.js";
export { redact, type RedactOptions } from "./redact.js";
export {
  createMemoryStore,
  type MemoryStore,
  type MemoryStoreOptions,
  type MemoryCall,
} from "./memory/store.js";
export type { MemoryFault, FaultTarget, StoreOperation } from "./memory/faults.js";
export { createFileStore, type FileStoreOptions } from "./file/store.js";
export { isFileStoreTemporary, TEMP_PREFIX as FILE_STORE_TEMP_PREFIX } from "./file/layout.js";
export { openStore, type OpenStoreOptions } from "./open.js";
export {
  qualify,
  isQualified,
  DEFAULT_QUALIFY_PART_SIZE,
  QUALIFY_PREFIX,
  type QualifyOptions,
  type QualificationReport,
  type QualificationCheck,
  type QualificationCheckName,
} from "./qualify.js";
export { createS3Store, type S3StoreOptions } from "./s3/store.js";
export { resolveS3Endpoint, type S3Dialect, type ResolvedS3Endpoint } from "./s3/client.js";
export { createGcsStore, type GcsStoreOptions, type GcsServiceAccount } from "./gcs/store.js";
export { copyPrefix, copyPrefixIter, type CopyPrefixOptions } from "./transfer/copy.js";
export { downloadPrefix, downloadPrefixIter, PART_SUFFIX } from "./transfer/download.js";
export type { TransferEvent, TransferReport, TransferOptions } from "./transfer/events.js";
export { defaultBackoffDelay } from "./internal/retry.js";
