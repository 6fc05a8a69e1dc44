import { isAbort } from "@ckpt/errors";
import { ArchiveReaderError } from "../errors.js";

/** Default parallel HEADs: enough to hide round trips, few enough not to trip a rate limit. */
export const DEFAULT_HEAD_CONCURRENCY = 8;

export function abortedError(subject: string, signal: AbortSignal): ArchiveReaderError {
  return new ArchiveReaderError("READER_ABORTED", `${subject}: aborted before it finished.`, {
    kind: "transient",
    subject,
    cause: signal.reason,
  });
}

/**
 * An abort noticed below this package (the store's STORE_ABORTED, the hasher's HASH_ABORTED) as
 * this package's READER_ABORTED, caused by it; any other error unchanged.
 */
export function asReaderAbort(error: unknown, subject: string): unknown {
  if (!isAbort(error) || error instanceof ArchiveReaderError) return error;
  return new ArchiveReaderError("READER_ABORTED", `${subject}: aborted before it finished.`, {
    kind: "transient",
    subject,
    cause: error,
  });
}
