import { describe, expect, it } from "vitest";
import { ObjectStoreError } from "../errors.js";
import { backoffDelay, defaultBackoffDelay, withRetry } from "./retry.js";

const transientError = () => new ObjectStoreError("STORE_TRANSIENT", "503 slow down", { kind: "transient" });
const permanentError = () => new ObjectStoreError("STORE_ACCESS_DENIED", "403", { kind: "refused" });
const isTransient = (e: unknown) => e instanceof ObjectStoreError && e.kind === "transient";

function recordingSleep() {
  const waits: number[] = [];
  return { waits, sleep: async (ms: number) => void waits.push(ms) };
}

describe("backoffDelay", () => {
  it("grows exponentially up to the cap and scales by the jitter", () => {
    expect(backoffDelay(1, 100, 1000, 0.999)).toBe(99);
    expect(backoffDelay(2, 100, 1000, 0.5)).toBe(100);
    expect(backoffDelay(3, 100, 1000, 0.5)).toBe(200);
    expect(backoffDelay(10, 100, 1000, 0.5)).toBe(500);
    expect(backoffDelay(4, 100, 1000, 0)).toBe(0);
  });

  it("has the stores' tuning by default: up to 200 ms at the first retry, at most 5 s", () => {
    expect(defaultBackoffDelay(1, 0.999)).toBe(199);
    expect(defaultBackoffDelay(3, 0.5)).toBe(400);
    expect(defaultBackoffDelay(20, 0.5)).toBe(2500);
    expect(defaultBackoffDelay(2)).toBeLessThan(400);
  });
});

describe("withRetry", () => {
  it("retries transient errors with full-jitter backoff, then succeeds", async () => {
    const { waits, sleep } = recordingSleep();
    const attempts: number[] = [];
    const value = await withRetry(
      async (attempt) => {
        attempts.push(attempt);
        if (attempt < 3) throw transientError();
        return "ok";
      },
      { isTransient, sleep, baseDelayMs: 100, maxDelayMs: 1000, random: () => 0.5 },
    );
    expect(value).toBe("ok");
    expect(attempts).toEqual([1, 2, 3]);
    expect(waits).toEqual([50, 100]);
  });

  it("does not retry a permanent error", async () => {
    const { waits, sleep } = recordingSleep();
    let calls = 0;
    const p = withRetry(
      async () => {
        calls++;
        throw permanentError();
      },
      { isTransient, sleep },
    );
    await expect(p).rejects.toMatchObject({ code: "STORE_ACCESS_DENIED" });
    expect(calls).toBe(1);
    expect(waits).toEqual([]);
  });

  it("rethrows the last transient error once the retries are spent", async () => {
    const { waits, sleep } = recordingSleep();
    let calls = 0;
    const p = withRetry(
      async () => {
        calls++;
        throw transientError();
      },
      { isTransient, sleep, retries: 2 },
    );
    await expect(p).rejects.toMatchObject({ code: "STORE_TRANSIENT" });
    expect(calls).toBe(3);
    expect(waits).toHaveLength(2);
  });

  it("times an attempt out with STORE_TIMEOUT, aborts its signal and retries it", async () => {
    const signals: AbortSignal[] = [];
    const value = await withRetry(
      (attempt, signal) => {
        signals.push(signal);
        if (attempt === 1) return new Promise<string>(() => {});
        return Promise.resolve("second");
      },
      { isTransient: () => false, timeoutMs: 20, sleep: async () => {} },
    );
    expect(value).toBe("second");
    expect(signals[0]!.aborted).toBe(true);
    expect(signals[0]!.reason).toMatchObject({ code: "STORE_TIMEOUT" });
    expect(signals[1]!.aborted).toBe(false);
  });

  it("reports STORE_TIMEOUT when every attempt overruns", async () => {
    const p = withRetry(() => new Promise<never>(() => {}), {
      isTransient: () => false,
      timeoutMs: 10,
      retries: 1,
      sleep: async () => {},
      subject: "iter_1/model.pt",
    });
    await expect(p).rejects.toMatchObject({
      code: "STORE_TIMEOUT",
      kind: "transient",
      subject: "iter_1/model.pt",
    });
  });

  it("rejects with STORE_ABORTED before the first attempt when the signal is already aborted", async () => {
    let calls = 0;
    const p = withRetry(
      async () => {
        calls++;
        return 1;
      },
      { isTransient, signal: AbortSignal.abort() },
    );
    await expect(p).rejects.toMatchObject({ code: "STORE_ABORTED" });
    expect(calls).toBe(0);
  });

  it("aborts a running attempt and the backoff wait", async () => {
    const controller = new AbortController();
    let attemptSignal: AbortSignal | undefined;
    const p = withRetry(
      (_attempt, signal) => {
        attemptSignal = signal;
        return new Promise<never>(() => {});
      },
      { isTransient, signal: controller.signal },
    );
    setTimeout(() => controller.abort(), 5);
    await expect(p).rejects.toMatchObject({ code: "STORE_ABORTED" });
    expect(attemptSignal?.aborted).toBe(true);

    const waiting = new AbortController();
    const q = withRetry(
      async () => {
        throw transientError();
      },
      { isTransient, signal: waiting.signal, baseDelayMs: 60_000, maxDelayMs: 60_000, random: () => 0.9 },
    );
    setTimeout(() => waiting.abort(), 5);
    await expect(q).rejects.toMatchObject({ code: "STORE_ABORTED" });
  });

  it("turns a synchronous throw into a rejection", async () => {
    const p = withRetry(
      () => {
        throw permanentError();
      },
      { isTransient },
    );
    await expect(p).rejects.toMatchObject({ code: "STORE_ACCESS_DENIED" });
  });
});
