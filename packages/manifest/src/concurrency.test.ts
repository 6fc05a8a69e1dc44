import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { concurrencyOf, MAX_CONCURRENCY, mapPool } from "./concurrency.js";

describe("concurrencyOf (pure)", () => {
  it("takes the default for no number, and rounds down and clamps any other", () => {
    expect(concurrencyOf(undefined, 8)).toBe(8);
    expect(concurrencyOf(Number.NaN, 8)).toBe(8);
    expect(concurrencyOf(Number.POSITIVE_INFINITY, 4)).toBe(4);
    expect(concurrencyOf(0, 8)).toBe(1);
    expect(concurrencyOf(-3, 8)).toBe(1);
    expect(concurrencyOf(2.7, 8)).toBe(2);
    expect(concurrencyOf(1000, 8)).toBe(MAX_CONCURRENCY);
  });
});

describe("mapPool", () => {
  it("keeps input order whatever order the calls finish in, with at most `concurrency` in flight", async () => {
    let inFlight = 0;
    let peak = 0;
    const items = Array.from({ length: 20 }, (_, i) => i);
    const results = await mapPool(items, 3, async (i) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await sleep((20 - i) % 7);
      inFlight--;
      return i * 10;
    });
    expect(results).toEqual(items.map((i) => i * 10));
    expect(peak).toBe(3);
  });

  it("starts nothing after the first failure, lets the calls in flight finish, then rethrows it", async () => {
    const started: number[] = [];
    const finished: number[] = [];
    const failure = mapPool([0, 1, 2, 3, 4, 5], 2, async (i) => {
      started.push(i);
      if (i === 0) throw new Error("first");
      if (i === 1) {
        await sleep(20);
        finished.push(i);
        throw new Error("second, dropped");
      }
      finished.push(i);
      return i;
    });
    await expect(failure).rejects.toThrow("first");
    expect(started).toEqual([0, 1]);
    expect(finished).toEqual([1]);
  });

  it("maps an empty list to an empty list", async () => {
    expect(await mapPool([], 4, async () => 1)).toEqual([]);
  });
});
