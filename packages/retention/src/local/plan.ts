import { RetentionError } from "../errors.js";
import { type CheckpointInfo, evaluatePolicy, newestFirst, type RetentionPolicy } from "./policies.js";

/** What a plan removes from an iteration directory: its optimizer state, or the whole directory. */
export type RetentionTarget = "optimizer" | "iteration";

/** Why a planner keeps a checkpoint (or its optimizer state). */
export type RetentionKeepReason =
  /** `keepLast` is 0: this knob keeps everything. */
  | "keep_all"
  /** Among the newest `keepLast`. */
  | "within_keep_last"
  /** `latest_checkpoint.txt` names it: the resume source. */
  | "latest_pointer"
  /** The `keepFn` policy keeps it. */
  | "kept_by_policy"
  /** Upload is on and no `.uploaded` exists yet: the local copy may be the only one. */
  | "not_uploaded"
  /** Optimizer retention only: there is no optimizer state to remove. */
  | "no_optimizer";

export interface RetentionRemoval {
  readonly target: RetentionTarget;
  readonly iteration: number;
  readonly dir: string;
}

export interface RetentionKeep {
  readonly iteration: number;
  readonly dir: string;
  readonly reason: RetentionKeepReason;
}

/** A decision over full checkpoints, as data: `applyRetentionPlan` removes exactly `remove`. */
export interface RetentionPlan {
  readonly target: RetentionTarget;
  readonly remove: readonly RetentionRemoval[];
  readonly keep: readonly RetentionKeep[];
}

export interface LocalRetentionOptions {
  /** Keep the newest N; 0 keeps all. */
  readonly keepLast: number;
  /** Also keep what this policy keeps (e.g. `everyNSteps(1000)`). */
  readonly keepFn?: RetentionPolicy;
  /**
   * Upload is enabled: a checkpoint is removed only once its own `.uploaded` exists (a legacy
   * one-line marker counts). Each candidate is checked on its own, so a later successful upload
   * never releases an earlier one that failed.
   */
  readonly requireUploaded: boolean;
}

function plan(
  target: RetentionTarget,
  infos: readonly CheckpointInfo[],
  options: LocalRetentionOptions,
  candidates: (info: CheckpointInfo) => boolean,
): RetentionPlan {
  const what = target === "optimizer" ? "planOptimizerRetention" : "planModelRetention";
  if (!Number.isSafeInteger(options.keepLast) || options.keepLast < 0) {
    throw new RetentionError(
      "RETENTION_BAD_ARGUMENT",
      `${what}: keepLast must be an integer >= 0 (0 keeps all), not ${String(options.keepLast)}.`,
      { kind: "input" },
    );
  }
  if (typeof options.requireUploaded !== "boolean") {
    throw new RetentionError(
      "RETENTION_BAD_ARGUMENT",
      `${what}: requireUploaded must be true or false; say whether upload is enabled.`,
      { kind: "input" },
    );
  }
  const byPolicy = options.keepFn === undefined ? undefined : evaluatePolicy(options.keepFn, infos);
  const eligible = newestFirst(infos).filter((i) => candidates(infos[i]!));
  const newest = new Set(eligible.slice(0, options.keepLast));
  const reasonOf = (i: number): RetentionKeepReason | undefined => {
    const info = infos[i]!;
    if (!candidates(info)) return "no_optimizer";
    if (options.keepLast === 0) return "keep_all";
    if (newest.has(i)) return "within_keep_last";
    if (info.isLatest === true) return "latest_pointer";
    if (byPolicy?.[i] === true) return "kept_by_policy";
    if (options.requireUploaded && info.uploaded === "none") return "not_uploaded";
    return undefined;
  };
  const remove: RetentionRemoval[] = [];
  const keep: RetentionKeep[] = [];
  for (const i of newestFirst(infos).reverse()) {
    const { iteration, dir } = infos[i]!;
    const reason = reasonOf(i);
    if (reason === undefined) remove.push({ target, iteration, dir });
    else keep.push({ iteration, dir, reason });
  }
  return { target, remove, keep };
}

/**
 * Optimizer retention (`keep_optim_last`): remove `optim.pt` / `optim/` from every iteration
 * directory but the newest `keepLast` that still hold optimizer state; weights and trainer state
 * stay for every iteration. Counting only directories with optimizer state means a newer
 * directory that lacks it never costs the last resumable one. Pure.
 */
export function planOptimizerRetention(
  infos: readonly CheckpointInfo[],
  options: LocalRetentionOptions,
): RetentionPlan {
  return plan("optimizer", infos, options, (info) => info.hasOptimizer);
}

/**
 * Model retention (`keep_model_last`): remove whole iteration directories beyond the newest
 * `keepLast`. Pure.
 */
export function planModelRetention(
  infos: readonly CheckpointInfo[],
  options: LocalRetentionOptions,
): RetentionPlan {
  return plan("iteration", infos, options, () => true);
}
