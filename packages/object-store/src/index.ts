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
  ObjectStore,
  StoreCredentials,
} from "./types.js";
export { ObjectStoreError, type ObjectStoreErrorCode, type ErrorKind } from "./errors.js";

// --- uri parsing, credentials, openStore, backends, qualify (added by their owners)
