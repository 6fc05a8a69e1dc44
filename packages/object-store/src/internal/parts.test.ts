import { describe, expect, it } from "vitest";
import { type PartLease, PartBuffers } from "./parts.js";

const settledSoon = async <T>(promise: Promise<T>): Promise<"pending" | T> =>
  Promise.race([promise, new Promise<"pending">((resolve) => setTimeout(() => resolve("pending"), 20))]);

describe("PartBuffers (the part memory shared by a store's uploads)", () => {
  it("lends up to the budget, then makes the next request wait until a part comes back", async () => {
    const pool = new PartBuffers(30);
    const a = await pool.acquire(10);
    const b = await pool.acquire(10);
    const c = await pool.acquire(10);
    expect(pool.held).toBe(30);
    const d = pool.acquire(10);
    expect(await settledSoon(d)).toBe("pending");
    b.release();
    const lent = await d;
    expect(lent.bytes.byteLength).toBe(10);
    // The returned buffer was reused, not a new one allocated beside it.
    expect(pool.held).toBe(30);
    for (const lease of [a, c, lent]) lease.release();
    expect(pool.held).toBeLessThanOrEqual(30);
  });

  it("serves waiters in request order, even when a later, smaller request would fit", async () => {
    const pool = new PartBuffers(20);
    const first = await pool.acquire(15);
    const order: string[] = [];
    const big = pool.acquire(15).then((l) => {
      order.push("big");
      return l;
    });
    const small = pool.acquire(5).then((l) => {
      order.push("small");
      return l;
    });
    expect(await settledSoon(small)).toBe("pending");
    first.release();
    (await big).release();
    (await small).release();
    expect(order).toEqual(["big", "small"]);
  });

  it("lends a part larger than the whole budget when nothing else is out", async () => {
    const pool = new PartBuffers(8);
    const small = await pool.acquire(4);
    const huge = pool.acquire(32);
    expect(await settledSoon(huge)).toBe("pending");
    small.release();
    const lease = await huge;
    expect(lease.bytes.byteLength).toBe(32);
    // The small spare was dropped to make room: the budget is exceeded by the one big part only.
    expect(pool.held).toBe(32);
    lease.discard();
    expect(pool.held).toBe(0);
  });

  it("never reuses a discarded buffer (a failed request's socket may still read it)", async () => {
    const pool = new PartBuffers(16);
    const a = await pool.acquire(16);
    a.bytes.fill(1);
    a.discard();
    const b = await pool.acquire(16);
    expect(b.bytes.buffer).not.toBe(a.bytes.buffer);
    b.release();
    const c = await pool.acquire(16);
    expect(c.bytes.buffer).toBe(b.bytes.buffer);
  });

  it("settles a lease once: a second release does not free budget twice", async () => {
    const pool = new PartBuffers(10);
    const a = await pool.acquire(10);
    a.release();
    a.release();
    a.discard();
    const b = await pool.acquire(10);
    const c = pool.acquire(10);
    expect(await settledSoon(c)).toBe("pending");
    b.release();
    (await c).release();
  });

  it("rejects a waiting request when its signal aborts, and lets the next one through", async () => {
    const pool = new PartBuffers(10);
    const held = await pool.acquire(10);
    const stop = new AbortController();
    const aborted = pool.acquire(10, stop.signal, "s3://b/model.pt");
    const next = pool.acquire(10);
    stop.abort();
    await expect(aborted).rejects.toMatchObject({ code: "STORE_ABORTED" });
    held.release();
    const lease: PartLease = await next;
    expect(lease.bytes.byteLength).toBe(10);
    await expect(pool.acquire(1, stop.signal)).rejects.toMatchObject({ code: "STORE_ABORTED" });
  });

  it("drops spare buffers too small for a request instead of exceeding the budget", async () => {
    const pool = new PartBuffers(24);
    const a = await pool.acquire(8);
    const b = await pool.acquire(8);
    a.release();
    b.release();
    expect(pool.held).toBe(16);
    const big = await pool.acquire(20);
    expect(pool.held).toBeLessThanOrEqual(24);
    big.release();
  });
});
