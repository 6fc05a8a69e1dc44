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
