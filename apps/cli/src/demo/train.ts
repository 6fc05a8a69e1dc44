// The demo's training loop, driven by @ckpt/trainer-checkpoint-manager: the manager decides the
// attempt, where to resume from, which save is due and where its files go, and commits them; the
// loop only trains and writes its component files at the targets it is handed.
import type {
  CheckpointManager,
  CommitReport,
  ManagerEvent,
  ResumeDecision,
} from "@ckpt/trainer-checkpoint-manager";
import { freshState, makeTask, type TrainState, trainStep, validationLoss } from "./model.js";
import { pathsFor, readTrainState, writeComponents } from "./state-files.js";

export interface TrainOptions {
  readonly outputRoot: string;
  /** The run's name under `demo/mlp/`. */
  readonly name: string;
  /** Train until this iteration. */
  readonly steps: number;
  readonly saveEvery: number;
  readonly keepOptimLast: number;
  readonly keepModelLast: number;
  /** Iterations where validation runs and saves a model-only artifact (a partial plan). */
  readonly validateAt?: readonly number[];
  readonly initSeed: number;
  readonly taskSeed: number;
  readonly dataSeed: number;
  /** Pause inside the save of this iteration once its first component file is on disk. */
  readonly pauseInSaveAt?: { readonly iteration: number; readonly pause: () => Promise<void> };
  readonly onEvent?: (event: TrainEvent) => void;
}

type TrainEvent =
  | { readonly type: "manager"; readonly event: ManagerEvent }
  | { readonly type: "resume"; readonly decision: ResumeDecision }
  | { readonly type: "step"; readonly iteration: number; readonly steps: number; readonly loss: number }
  | { readonly type: "saved"; readonly report: CommitReport }
  | { readonly type: "validated"; readonly iteration: number; readonly loss: number };

export interface TrainResult {
  readonly attemptDir: string;
  readonly runTs: string;
  readonly resume: ResumeDecision;
  readonly saves: readonly CommitReport[];
  readonly startIteration: number;
  readonly finalIteration: number;
  readonly finalLoss: number;
  readonly validationLoss: number | null;
}

/** The manager's configuration knobs (seed 001's table) for a demo run. */
function demoConfig(options: Pick<TrainOptions, "saveEvery" | "keepOptimLast" | "keepModelLast">) {
  return {
    save_every: options.saveEvery,
    resume: "auto",
    save_async: false,
    keep_optim_last: options.keepOptimLast,
    keep_model_last: options.keepModelLast,
    validation: { save_checkpoint: true, checkpoint_components: ["model"] },
  };
}

async function openDemoManager(
  options: Pick<
    TrainOptions,
    "outputRoot" | "name" | "saveEvery" | "keepOptimLast" | "keepModelLast" | "onEvent"
  >,
): Promise<CheckpointManager> {
  const { CheckpointManager, parseManagerConfig } = await import("@ckpt/trainer-checkpoint-manager");
  return CheckpointManager.open({
    config: parseManagerConfig(demoConfig(options)).config,
    outputRoot: options.outputRoot,
    project: "demo",
    group: "mlp",
    name: options.name,
    termination: { sentinelPath: null, signals: false },
    onEvent: (event) => options.onEvent?.({ type: "manager", event }),
  });
}

/** Opens the manager, resumes as it decides, trains to `steps` and saves whatever it plans. */
export async function train(options: TrainOptions): Promise<TrainResult> {
  const manager = await openDemoManager(options);
  const meta = { taskSeed: options.taskSeed, dataSeed: options.dataSeed };
  const task = makeTask(options.taskSeed, options.dataSeed);
  const saves: CommitReport[] = [];
  let lastValidation: number | null = null;
  try {
    const resume = await manager.resolveResume();
    options.onEvent?.({ type: "resume", decision: resume });
    let state: TrainState;
    if (resume.kind === "checkpoint" && resume.iteration !== undefined && resume.components.optim) {
      state = await readTrainState(resume.components.optim, resume.iteration);
    } else {
      state = freshState(options.initSeed);
    }
    const startIteration = state.step;
    const validateAt = new Set(options.validateAt ?? []);
    while (state.step < options.steps) {
      trainStep(state, task);
      const iteration = state.step;
      options.onEvent?.({ type: "step", iteration, steps: options.steps, loss: state.loss });
      const validation = validateAt.has(iteration);
      if (validation) {
        lastValidation = validationLoss(state.params, task);
        options.onEvent?.({ type: "validated", iteration, loss: lastValidation });
      }
      const plan = manager.planSave(iteration, {
        cadence: iteration % options.saveEvery === 0,
        final: iteration === options.steps,
        validation,
      });
      if (plan === undefined) continue;
      const session = await manager.beginSave(iteration, plan);
      const pause = options.pauseInSaveAt?.iteration === iteration ? options.pauseInSaveAt.pause : undefined;
      await writeComponents(pathsFor(session.targets, plan.components), state, meta, pause);
      const outcome = await manager.commitSave(session);
      const report =
        outcome.status === "committed"
          ? outcome.report
          : outcome.status === "scheduled"
            ? await outcome.completion
            : undefined;
      if (report) {
        saves.push(report);
        options.onEvent?.({ type: "saved", report });
      }
    }
    return {
      attemptDir: manager.attemptDir,
      runTs: manager.runTs,
      resume,
      saves,
      startIteration,
      finalIteration: state.step,
      finalLoss: state.loss,
      validationLoss: lastValidation,
    };
  } finally {
    await manager.finalize();
  }
}
