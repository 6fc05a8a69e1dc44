/**
 * Runs `work` while yielding the events it emits, then returns its result: the bridge between
 * callback-style progress (hashing, uploads) and the async generators this package exposes.
 */
export async function* withEvents<E, T>(
  work: (emit: (event: E) => void) => Promise<T>,
): AsyncGenerator<E, T> {
  const queue: E[] = [];
  let wake: (() => void) | undefined;
  let settled = false;
  const emit = (event: E) => {
    queue.push(event);
    wake?.();
  };
  const running = work(emit).finally(() => {
    settled = true;
    wake?.();
  });
  // Keep an early rejection from being reported as unhandled while events are still drained.
  running.catch(() => {});
  for (;;) {
    while (queue.length > 0) yield queue.shift()!;
    if (settled) break;
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
    wake = undefined;
  }
  return running;
}

/** Drains a generator, handing each event to `onEvent`, and returns its result. */
export async function drain<E, T>(iter: AsyncGenerator<E, T>, onEvent?: (event: E) => void): Promise<T> {
  for (;;) {
    const next = await iter.next();
    if (next.done) return next.value;
    onEvent?.(next.value);
  }
}
