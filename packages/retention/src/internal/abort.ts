import { RetentionError } from "../errors.js";

/** The error an aborted executor throws. */
export function abortedError(subject: string, signal: AbortSignal): RetentionError {
  return new RetentionError("RETENTION_ABORTED", `${subject}: aborted by the caller before it finished.`, {
    kind: "transient",
    subject,
    cause: signal.reason,
  });
}
