import type { ObjectStoreError } from "../errors.js";
import { toStoreError } from "../s3/errors.js";

/** HTTP status → the error name the shared mapping understands (GCS's JSON API uses reasons). */
function nameForStatus(status: number): string {
  if (status === 404) return "NotFound";
  if (status === 412) return "PreconditionFailed";
  if (status === 429) return "TooManyRequestsException";
  if (status === 403) return "AccessDenied";
  if (status === 401) return "InvalidToken";
  return `HTTP${status}`;
}

/** The HTTP status of a @google-cloud/storage ApiError (its numeric `code`). */
export function gcsStatusOf(error: unknown): number | undefined {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === "number" ? code : undefined;
}

/**
 * Translate a @google-cloud/storage failure into an ObjectStoreError through the same rules as
 * the S3 backend: ApiErrors carry the HTTP status in `code`, network errors a Node `code` string.
 */
export function gcsToStoreError(error: unknown, action: string, subject: string): ObjectStoreError {
  const status = gcsStatusOf(error);
  if (status === undefined) return toStoreError(error, action, subject);
  return toStoreError(
    { name: nameForStatus(status), $metadata: { httpStatusCode: status }, cause: error },
    action,
    subject,
  );
}
