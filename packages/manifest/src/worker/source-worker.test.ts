import { describe, expect, it, vi } from "vitest";
import { type SourceWorkerEnd, startSourceWorker } from "./source-worker.js";

/** Starts `body` as a thread (with `parentPort` and `workerData` in scope) and records what it does. */
function run(body: string, workerData: unknown = null) {
  const messages: unknown[] = [];
  const ends: SourceWorkerEnd[] = [];
  let ended!: () => void;
  const done = new Promise<void>((resolve) => {
    ended = resolve;
  });
  const worker = startSourceWorker<unknown, unknown>(
    `"use strict";
(async () => {
  const { parentPort, workerData } = await import("node:worker_threads");
  ${body}
})();
`,
    workerData,
    {
      onMessage: (message) => messages.push(message),
      onEnd: (end) => {
        ends.push(end);
        ended();
      },
    },
  );
  return { worker, messages, ends, done };
}

/** Lets any event that would follow the first end arrive (it must not be reported). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

describe("startSourceWorker", () => {
  it("passes workerData in and each message out, then reports the thread's exit once", async () => {
    const thread = run(`parentPort.postMessage({ doubled: workerData * 2 });`, 21);
    await thread.done;
    await settle();
    expect(thread.messages).toEqual([{ doubled: 42 }]);
    expect(thread.ends).toEqual([{ exitCode: 0 }]);
  });

  it("answers posted messages until terminated, then reports the exit terminate caused", async () => {
    const thread = run(`parentPort.on("message", (n) => parentPort.postMessage(n + 1));`);
    thread.worker.post(1);
    thread.worker.post(10);
    await vi.waitFor(() => expect(thread.messages).toHaveLength(2), { timeout: 20_000 });
    expect(thread.ends).toEqual([]);
    await thread.worker.terminate();
    await thread.done;
    expect(thread.messages).toEqual([2, 11]);
    expect(thread.ends).toEqual([{ exitCode: 1 }]);
  });

  it("reports a thread that throws by its error, and not again when it then exits", async () => {
    const thread = run(`throw new Error("boom");`);
    await thread.done;
    await settle();
    expect(thread.ends).toHaveLength(1);
    const [end] = thread.ends;
    expect(end).toHaveProperty("error");
    expect((end as { error: Error }).error.message).toBe("boom");
  });

  it("reports a thread that exits with a non-zero code by that code", async () => {
    const thread = run(`process.exit(3);`);
    await thread.done;
    await settle();
    expect(thread.messages).toEqual([]);
    expect(thread.ends).toEqual([{ exitCode: 3 }]);
  });
});
