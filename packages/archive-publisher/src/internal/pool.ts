/** HEAD requests in flight while reading a destination's state or verifying it. */
export const DEFAULT_HEAD_CONCURRENCY = 8;
/**
 * Payload uploads in flight: enough to hide the round trips of many small shards. Memory does not
 * grow with it: a file streams through a small buffer and parts come from the store's shared budget.
 */
export const DEFAULT_UPLOAD_CONCURRENCY = 8;
