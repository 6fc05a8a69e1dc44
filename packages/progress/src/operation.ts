/**
 * A long operation: an async generator of progress events whose return value is the report.
 * Leaving the `for await` loop early (break, throw) stops the work.
 */
export type LongOperation<Event, Report> = AsyncGenerator<Event, Report, undefined>;

/** The executor behind a long operation: reports through `emit`, stops when `signal` aborts. */
export type Executor<Event, Report> = (emit: (event: Event) => void, signal: AbortSignal) => Promise<Report>;

/**
 * Runs `work` and yields the events it emits, in the order they were emitted (from any number of
 * concurrent emitters), then returns its report; a rejection is thrown after the events queued
 * before it. `work` gets a signal that aborts when `signal` (the caller's) aborts, with its
 * reason, and when the consumer leaves the loop early; the generator then waits for `work` to
 * settle, so nothing it started outlives the loop.
 */
export async function* withEvents<Event, Report>(
  work: Executor<Event, Report>,
  signal?: AbortSignal,
): LongOperation<Event, Report> {
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  const queue: Event[] = [];
  let wake: (() => void) | undefined;
  let settled = false;
  const notify = () => {
    const resume = wake;
    wake = undefined;
    resume?.();
  };
  const emit = (event: Event) => {
    queue.push(event);
    notify();
  };
  // Started on the next microtask so an executor that throws synchronously still rejects `running`.
  const running = Promise.resolve()
    .then(() => work(emit, stop.signal))
    .finally(() => {
      settled = true;
      notify();
    });
  // Keep an early rejection from being reported as unhandled while the queued events are yielded.
  running.catch(() => {});
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift()!;
      if (settled) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
    return await running;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    if (!settled) {
      stop.abort(new Error("the consumer of the events stopped reading them"));
      await running.catch(() => {});
    }
  }
}

/** Runs a long operation to its end, handing each event to `onEvent`, and returns its report. */
export async function drain<Event, Report>(
  operation: AsyncGenerator<Event, Report, undefined>,
  onEvent?: (event: Event) => void,
): Promise<Report> {
  for (;;) {
    const next = await operation.next();
    if (next.done) return next.value;
    onEvent?.(next.value);
  }
}

/**
 * The same operation with each event passed through `map` (to wrap or observe an inner
 * operation's events inside an outer one, by `yield*`); returns the inner report. Leaving early
 * stops the inner operation too.
 */
export async function* mapEvents<Event, Mapped, Report>(
  operation: AsyncGenerator<Event, Report, undefined>,
  map: (event: Event) => Mapped,
): LongOperation<Mapped, Report> {
  let finished = false;
  try {
    for (;;) {
      const step = await operation.next();
      if (step.done) {
        finished = true;
        return step.value;
      }
      yield map(step.value);
    }
  } finally {
    if (!finished) await operation.return(undefined as never);
  }
}
