import { ObjectStoreError } from "../errors.js";

/** Defaults sized for object-store requests: five attempts spread over a few seconds. */
const DEFAULT_RETRIES = 4;
const DEFAULT_BASE_DELAY_MS = 200;
const DEFAULT_MAX_DELAY_MS = 5_000;

export interface RetryOptions {
  /** Retries after the first attempt (so `retries + 1` attempts at most). Default 4. */
  readonly retries?: number;
  /** Backoff cap of the first retry; doubles each retry up to `maxDelayMs`. Default 200. */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Decides whether a failed attempt may be retried. Timeouts of an attempt always are. */
  readonly isTransient: (error: unknown) => boolean;
  /** Aborts the wait and the running attempt; the call rejects with `STORE_ABORTED`. */
  readonly signal?: AbortSignal;
  /** Injectable wait (tests pass a fake clock). Must reject when `signal` aborts. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Per-attempt timeout; an attempt that overruns is aborted and counts as `STORE_TIMEOUT`. */
  readonly timeoutMs?: number;
  /** Source of jitter in [0, 1). Default Math.random. */
  readonly random?: () => number;
  /** What the operation is about (a key or URI) for error messages. */
  readonly subject?: string;
  /** Called before each wait: the failed attempt (1-based), its error and the chosen delay. */
  readonly onRetry?: (event: { attempt: number; error: unknown; delayMs: number }) => void;
}

/**
 * Full-jitter exponential backoff: a uniform delay in [0, min(max, base * 2^(retry-1))).
 * Pure: `random` is a number in [0, 1).
 */
export function backoffDelay(retry: number, baseDelayMs: number, maxDelayMs: number, random: number): number {
  const cap = Math.min(maxDelayMs, baseDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.floor(cap * random);
}

/** {@link backoffDelay} with the stores' own tuning (200 ms doubling to 5 s), for retry loops outside a store. */
export function defaultBackoffDelay(retry: number, random: number = Math.random()): number {
  return backoffDelay(retry, DEFAULT_BASE_DELAY_MS, DEFAULT_MAX_DELAY_MS, random);
}

function abortedError(subject: string | undefined): ObjectStoreError {
  return new ObjectStoreError(
    "STORE_ABORTED",
    `${subject === undefined ? "store operation" : subject}: aborted by the caller.`,
    { kind: "failed", ...(subject === undefined ? {} : { subject }) },
  );
}

/** The default wait: a timer that rejects with `STORE_ABORTED` when `signal` aborts. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortedError(undefined));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(undefined));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs one attempt with its own AbortSignal, which fires on the caller's abort or on the
 * per-attempt timeout. Rejects as soon as either happens, without waiting for the attempt.
 */
function runAttempt<T>(
  operation: (attempt: number, signal: AbortSignal) => Promise<T>,
  attempt: number,
  options: RetryOptions,
): Promise<T> {
  const controller = new AbortController();
  const { signal, timeoutMs, subject } = options;
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const settle = () => {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      settle();
      controller.abort(abortedError(subject));
      reject(abortedError(subject));
    };
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    if (timeoutMs !== undefined && Number.isFinite(timeoutMs)) {
      timer = setTimeout(() => {
        const error = new ObjectStoreError(
          "STORE_TIMEOUT",
          `${subject ?? "store operation"}: attempt ${attempt} did not finish within ${timeoutMs} ms. ` +
            "Check the endpoint's reachability or raise the timeout.",
          { kind: "transient", ...(subject === undefined ? {} : { subject }) },
        );
        settle();
        controller.abort(error);
        reject(error);
      }, timeoutMs);
    }
    let pending: Promise<T>;
    try {
      pending = operation(attempt, controller.signal);
    } catch (error) {
      settle();
      reject(error);
      return;
    }
    pending.then(
      (value) => {
        settle();
        resolve(value);
      },
      (error: unknown) => {
        settle();
        reject(error);
      },
    );
  });
}

function isOwnTimeout(error: unknown): boolean {
  return error instanceof ObjectStoreError && error.code === "STORE_TIMEOUT";
}

/**
 * Runs `operation` until it succeeds, fails with a non-transient error, or the retries are spent
 * (then the last error is rethrown unchanged). Each attempt gets the attempt number (1-based) and
 * an AbortSignal to hand to the request: it fires on the caller's abort and on the per-attempt
 * timeout. A caller abort rejects with `STORE_ABORTED` and is never retried.
 */
export async function withRetry<T>(
  operation: (attempt: number, signal: AbortSignal) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const retries = options.retries ?? DEFAULT_RETRIES;
  const base = options.baseDelayMs ?? DEFAULT_BASE_DELAY_MS;
  const max = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
  const sleep = options.sleep ?? abortableSleep;
  const random = options.random ?? Math.random;
  for (let attempt = 1; ; attempt++) {
    try {
      return await runAttempt(operation, attempt, options);
    } catch (error) {
      if (options.signal?.aborted) throw abortedError(options.subject);
      const transient = isOwnTimeout(error) || options.isTransient(error);
      if (!transient || attempt > retries) throw error;
      const delayMs = backoffDelay(attempt, base, max, random());
      options.onRetry?.({ attempt, error, delayMs });
      try {
        await sleep(delayMs, options.signal);
      } catch (sleepError) {
        if (options.signal?.aborted) throw abortedError(options.subject);
        throw sleepError;
      }
    }
  }
}
