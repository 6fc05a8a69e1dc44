/** Upper bound of a caller's concurrency; more parallel requests only queue in the client. */
export const MAX_CONCURRENCY = 64;

/**
 * A caller's concurrency as a whole number from 1 to {@link MAX_CONCURRENCY}: `fallback` when it
 * is not a finite number, else rounded down and clamped. Pure.
 */
export function concurrencyOf(requested: number | undefined, fallback: number): number {
  if (requested === undefined || !Number.isFinite(requested)) return fallback;
  return Math.max(1, Math.min(MAX_CONCURRENCY, Math.floor(requested)));
}

/**
 * Maps `items` through `work` with at most `concurrency` calls in flight (clamped as
 * {@link concurrencyOf} does), results in input order. The first failure starts no new call and is
 * rethrown once the calls in flight have settled (their own failures are dropped): an upload or
 * download in flight is left to finish, so a retry resumes after it.
 */
export async function mapPool<T, R>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  const width = Math.max(1, Math.min(concurrencyOf(concurrency, 1), items.length));
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const index = next++;
      try {
        results[index] = await work(items[index]!, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  if (failure !== undefined) throw failure.error;
  return results;
}
