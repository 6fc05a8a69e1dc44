import { Worker } from "node:worker_threads";

/**
 * How a thread started by {@link startSourceWorker} ended: it threw (`error`), or it exited
 * (`exitCode`: 0 when its work ran out, 1 after `terminate`).
 */
export type SourceWorkerEnd = { readonly error: Error } | { readonly exitCode: number };

/** A running thread started by {@link startSourceWorker}. */
export interface SourceWorker<In> {
  /** Sends the thread one message (structured-cloned). */
  post(message: In): void;
  /** Stops the thread; `onEnd` then hears its exit, unless it had already ended. */
  terminate(): Promise<void>;
}

/**
 * Starts a worker thread from JavaScript source text (`eval: true`), so vitest (TypeScript
 * sources), the ESM build and the CJS build all load it the same way, with no worker file to
 * resolve. The text reads `workerData` and `parentPort` through `import("node:worker_threads")`,
 * which works whether Node evaluates it as a script or as a module.
 *
 * `onMessage` hears each message the thread posts. `onEnd` is called once, at the first of an
 * uncaught error and the thread's exit (the exit that follows an error is not reported again). The
 * owner decides what an end means: after the last reply an exit may be expected.
 */
export function startSourceWorker<In, Out>(
  source: string,
  workerData: unknown,
  handlers: { onMessage(message: Out): void; onEnd(end: SourceWorkerEnd): void },
): SourceWorker<In> {
  const worker = new Worker(source, { eval: true, workerData });
  let ended = false;
  const end = (how: SourceWorkerEnd) => {
    if (ended) return;
    ended = true;
    handlers.onEnd(how);
  };
  worker.on("message", (message: Out) => handlers.onMessage(message));
  worker.on("error", (error) => end({ error }));
  worker.on("exit", (exitCode) => end({ exitCode }));
  return {
    post: (message) => worker.postMessage(message),
    terminate: async () => {
      await worker.terminate();
    },
  };
}
