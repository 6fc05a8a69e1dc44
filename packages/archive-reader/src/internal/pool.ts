import { ArchiveReaderError } from "../errors.js";

/** Default parallel HEADs: enough to hide round trips, few enough not to trip a rate limit. */
export const DEFAULT_HEAD_CONCURRENCY = 8;
/** Upper bound on caller-chosen concurrency; more parallel requests only queue in the client. */
export const MAX_CONCURRENCY = 64;

export function abortedError(subject: string, signal: AbortSignal): ArchiveReaderError {
  return new ArchiveReaderError("READER_ABORTED", `${subject}: aborted before it finished.`, {
    kind: "transient",
    subject,
    cause: signal.reason,
  });
}

/**
 * Maps `items` through `work` with at most `concurrency` calls in flight, keeping input order.
 * The first failure stops new work and is rethrown once the calls in flight have settled.
 */
export async function mapPool<T, R>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  const width = Math.max(1, Math.min(MAX_CONCURRENCY, Math.floor(concurrency), items.length));
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
