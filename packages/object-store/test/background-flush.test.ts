// A file:// put flushes its file in the background while it is still written (the disk works
// during the copy instead of all at the final fsync). These tests hold the flusher to its rules:
// a flush per `everyBytes` written, never two at once, and a failed flush never lost.
import { describe, expect, it } from "vitest";
import { BackgroundFlush } from "../src/internal/background-flush.js";

/** A datasync whose calls are counted and settled by the test. */
function controlledSync() {
  const pending: { resolve: () => void; reject: (error: Error) => void }[] = [];
  return {
    pending,
    datasync: () => new Promise<void>((resolve, reject) => pending.push({ resolve, reject })),
  };
}

describe("BackgroundFlush", () => {
  it("starts a flush once every everyBytes written, and never a second one while one runs", async () => {
    const sync = controlledSync();
    const flush = new BackgroundFlush(sync.datasync, 100);
    flush.written(99);
    expect(sync.pending).toHaveLength(0);
    flush.written(100);
    expect(sync.pending).toHaveLength(1);
    flush.written(250); // 150 more, but the first flush still runs
    expect(sync.pending).toHaveLength(1);
    sync.pending[0]!.resolve();
    await Promise.resolve();
    await Promise.resolve();
    flush.written(260);
    expect(sync.pending).toHaveLength(2);
    flush.written(270);
    expect(sync.pending).toHaveLength(2);
    sync.pending[1]!.resolve();
    await flush.settle();
  });

  it("keeps a failed flush and throws it from settle, since the final fsync would not report it again", async () => {
    const sync = controlledSync();
    const flush = new BackgroundFlush(sync.datasync, 10);
    flush.written(10);
    const eio = Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" });
    sync.pending[0]!.reject(eio);
    await expect(flush.settle()).rejects.toBe(eio);
    // No further flushes once one failed: the put is lost anyway.
    flush.written(1000);
    expect(sync.pending).toHaveLength(1);
    await expect(flush.settle()).rejects.toBe(eio);
  });

  it("settle waits for the flush in flight", async () => {
    const sync = controlledSync();
    const flush = new BackgroundFlush(sync.datasync, 1);
    flush.written(1);
    let settled = false;
    const done = flush.settle().then(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(settled).toBe(false);
    sync.pending[0]!.resolve();
    await done;
    expect(settled).toBe(true);
  });
});
