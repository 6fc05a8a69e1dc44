/**
 * `load`, run once on the first call and shared by every later one: the heavy client libraries
 * (AWS SDK, Google Cloud Storage) are imported only when a store of theirs is first used, so
 * `file://` and local-only commands never pay for loading them. A failed load is not cached.
 */
export function lazy<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= load().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}
