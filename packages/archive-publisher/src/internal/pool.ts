/** HEAD requests in flight while reading a destination's state or verifying it. */
export const DEFAULT_HEAD_CONCURRENCY = 8;
/** Payload uploads in flight: few, since each is a large body (and multipart below that). */
export const DEFAULT_UPLOAD_CONCURRENCY = 4;
