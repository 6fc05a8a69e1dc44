// The demo's first training run happens in a real child process (`ckpt demo --worker <spec>`), so
// that the kill fault is a real SIGKILL of a process that is writing a checkpoint. The worker
// reports on stdout as JSON lines; the parent reads them.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import type { CommitReport, ResumeDecision } from "@ckpt/trainer-checkpoint-manager";
import { DemoError } from "./errors.js";
import type { TrainOptions, TrainResult } from "./train.js";

/** What the parent hands the worker (JSON on the command line). */
export type WorkerSpec = Omit<TrainOptions, "pauseInSaveAt" | "onEvent"> & {
  /** Pause inside this iteration's save, after its first file, until the parent acts (it kills). */
  readonly pauseInSaveAt?: number;
};

export type WorkerLine =
  | { readonly type: "resume"; readonly decision: ResumeDecision }
  | { readonly type: "saved"; readonly report: CommitReport }
  | { readonly type: "mid_save"; readonly iteration: number; readonly pid: number }
  | { readonly type: "done"; readonly result: TrainResult }
  | { readonly type: "error"; readonly code: string; readonly message: string };

/** The worker side: trains as the spec says and reports each event as one line. */
export async function runWorker(specJson: string, out: NodeJS.WritableStream): Promise<number> {
  const { train } = await import("./train.js");
  const { pauseInSaveAt, ...spec } = JSON.parse(specJson) as WorkerSpec;
  const say = (line: WorkerLine) => out.write(`${JSON.stringify(line)}\n`);
  try {
    const result = await train({
      ...spec,
      ...(pauseInSaveAt === undefined
        ? {}
        : {
            pauseInSaveAt: {
              iteration: pauseInSaveAt,
              // Hold the save open: the parent SIGKILLs this process now; it never answers.
              pause: () =>
                new Promise<void>(() => {
                  say({ type: "mid_save", iteration: pauseInSaveAt, pid: process.pid });
                }),
            },
          }),
      onEvent: (event) => {
        if (event.type === "resume") say({ type: "resume", decision: event.decision });
        else if (event.type === "saved") say({ type: "saved", report: event.report });
      },
    });
    say({ type: "done", result });
    return 0;
  } catch (error) {
    const e = error as { code?: string; message?: string };
    say({ type: "error", code: e.code ?? "INTERNAL", message: e.message ?? String(error) });
    return 1;
  }
}

export interface WorkerOutcome {
  readonly pid: number;
  readonly saves: readonly CommitReport[];
  /** Set when the parent killed the worker inside this iteration's save. */
  readonly killedInSave?: number;
  readonly signal: NodeJS.Signals | null;
  readonly exitCode: number | null;
  readonly result?: TrainResult;
}

/** The ckpt entry point of this process, which the worker re-runs. */
function cliEntry(): string {
  const entry = process.argv[1];
  if (entry === undefined || !entry.endsWith(".js") || !existsSync(entry)) {
    throw new DemoError(
      "DEMO_NO_WORKER_ENTRY",
      `ckpt demo runs its trainer as a child process of the ckpt command, but this process (${entry ?? "?"}) is not it. Run the built CLI: node apps/cli/dist/bin.js demo.`,
      "failed",
    );
  }
  return entry;
}

/** Runs the worker; with `killInSave`, SIGKILLs it as soon as it reports being inside that save. */
export function runTrainWorker(
  spec: WorkerSpec,
  onLine?: (line: WorkerLine) => void,
): Promise<WorkerOutcome> {
  const child = spawn(process.execPath, [cliEntry(), "demo", "--worker", JSON.stringify(spec)], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  const saves: CommitReport[] = [];
  let killedInSave: number | undefined;
  let result: TrainResult | undefined;
  let failure: { code: string; message: string } | undefined;
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const lines = createInterface({ input: child.stdout });
  lines.on("line", (text) => {
    let line: WorkerLine;
    try {
      line = JSON.parse(text) as WorkerLine;
    } catch {
      return; // not a report line
    }
    onLine?.(line);
    if (line.type === "saved") saves.push(line.report);
    else if (line.type === "done") result = line.result;
    else if (line.type === "error") failure = line;
    else if (line.type === "mid_save" && line.iteration === spec.pauseInSaveAt) {
      killedInSave = line.iteration;
      child.kill("SIGKILL");
    }
  });
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (exitCode, signal) => {
      if (failure) {
        reject(
          new DemoError(
            failure.code,
            `demo trainer (pid ${child.pid}): ${failure.message}`,
            "failed",
            "trainer",
          ),
        );
        return;
      }
      if (killedInSave === undefined && exitCode !== 0) {
        reject(
          new DemoError(
            "DEMO_WORKER_FAILED",
            `demo trainer (pid ${child.pid}) ended with ${signal ?? `exit code ${exitCode}`}: ${stderr.trim()}`,
            "failed",
          ),
        );
        return;
      }
      resolve({
        pid: child.pid ?? -1,
        saves,
        ...(killedInSave === undefined ? {} : { killedInSave }),
        signal,
        exitCode,
        ...(result === undefined ? {} : { result }),
      });
    });
  });
}
