import { LOGICAL_COMPONENTS, type LogicalComponent, logicalComponentName } from "@ckpt/manifest";
import { RetentionError } from "../errors.js";

/** Bytes per element of the weights' dtype. */
export const WEIGHT_DTYPE_BYTES = { fp32: 4, bf16: 2, fp16: 2, fp8: 1 } as const;
export type WeightDType = keyof typeof WEIGHT_DTYPE_BYTES;

/** Bytes per element of the optimizer's per-parameter state. */
export const STATE_DTYPE_BYTES = { fp32: 4, bf16: 2 } as const;
export type StateDType = keyof typeof STATE_DTYPE_BYTES;

/** Per-parameter state tensors each optimizer keeps (what `optim.pt` holds besides scalars). */
export const OPTIMIZER_STATES = {
  adamw: { tensors: 2, what: "two moments per parameter (exp_avg, exp_avg_sq)" },
  adam: { tensors: 2, what: "two moments per parameter (exp_avg, exp_avg_sq)" },
  lion: { tensors: 1, what: "one momentum per parameter" },
  sgd: { tensors: 1, what: "one momentum buffer per parameter (SGD without momentum keeps none: use none)" },
  adagrad: { tensors: 1, what: "one running sum of squared gradients per parameter" },
  rmsprop: { tensors: 1, what: "one running square average per parameter (momentum adds another)" },
  adafactor: {
    tensors: 0,
    what: "factored second moments only (row and column statistics per matrix, O(rows + cols), counted as 0 bytes per parameter) and no first moment",
  },
  none: { tensors: 0, what: "no per-parameter state" },
} as const;
export type OptimizerName = keyof typeof OPTIMIZER_STATES;

/** trainer.pt (clocks, RNG, scheduler; about 4 KiB) plus an optional data.pt cursor. */
export const DEFAULT_TRAINING_STATE_BYTES = 8 * 1024;

export interface FootprintInput {
  /** Model parameters (e.g. 7e9; see `parseParamCount`). */
  readonly params: number;
  readonly dtype?: WeightDType;
  readonly optimizer?: OptimizerName;
  readonly stateDtype?: StateDType;
  /** The optimizer also saves an fp32 master copy of the weights (mixed precision). Default false. */
  readonly masterWeights?: boolean;
  /** model.pt also holds a maintained EMA copy of the weights (same dtype). Default false. */
  readonly ema?: boolean;
  /** The component plan; default all three (a full, resumable checkpoint). */
  readonly components?: readonly LogicalComponent[];
  /** keep_optim_last: optimizer state kept in the newest N checkpoints; 0 keeps all. Default 1 (local primary). */
  readonly keepOptimLast?: number;
  /** keep_model_last: whole checkpoints kept; 0 keeps all. Default 0. */
  readonly keepModelLast?: number;
  /** Saves over the run; undefined when unknown (a setting that keeps everything then grows without bound). */
  readonly iterations?: number;
  readonly trainingStateBytes?: number;
}

export interface RetentionFootprint {
  readonly keepOptimLast: number;
  readonly keepModelLast: number;
  /** Checkpoints (iteration directories) on disk after a save's retention ran, and how many still hold optimizer state. */
  readonly checkpoints: number | null;
  readonly withOptimizer: number | null;
  /** Disk after a save's retention ran; null when the setting keeps everything and `iterations` is unknown. */
  readonly bytesAfterSave: number | null;
  /** The most a save needs: the new checkpoint is complete before retention removes anything. */
  readonly peakBytes: number | null;
  /** Bytes added per save when nothing bounds the growth. */
  readonly growthPerSave: number;
}

export interface FootprintEstimate {
  /** Always true: these numbers are computed, not measured. */
  readonly estimate: true;
  readonly params: number;
  /** Bytes per selected component of one checkpoint. */
  readonly components: Readonly<Partial<Record<LogicalComponent, number>>>;
  readonly perCheckpoint: number;
  /** A proper subset of the components: artifacts under checkpoint_artifacts/, never pruned by retention. */
  readonly artifact: boolean;
  /** The requested setting first, then the comparisons (keep everything; the local default). */
  readonly retention: readonly RetentionFootprint[];
  /** Bytes written over `iterations` saves (I/O volume, not disk use). */
  readonly writtenOverRun: number | null;
  readonly assumptions: readonly string[];
}

const SUFFIX: Record<string, number> = { K: 1e3, M: 1e6, B: 1e9, G: 1e9, T: 1e12 };
/** Larger than any model anyone checkpoints; keeps byte counts exact integers. */
const MAX_PARAMS = 1e15;

function bad(message: string): RetentionError {
  return new RetentionError("RETENTION_BAD_ARGUMENT", `estimate: ${message}`, { kind: "input" });
}

/** "7B", "1.5b", "350M", "70k", "1.2T", "7e9", "7000000000" → a parameter count. Pure. */
export function parseParamCount(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kKmMbBgGtT])?\s*$/.exec(text);
  const value = match ? Number(match[1]) * (match[2] ? SUFFIX[match[2].toUpperCase()]! : 1) : Number.NaN;
  if (!Number.isFinite(value) || value < 1 || value > MAX_PARAMS) {
    throw bad(`--params ${JSON.stringify(text)} is not a parameter count like 7B, 350M, 1.5e9 (1 to 1e15).`);
  }
  return Math.round(value);
}

function requireCount(value: number | undefined, name: string): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
    throw bad(`${name} ${String(value)} is not a whole number >= 0.`);
  }
}

/**
 * Disk use under one retention setting after `saves` full checkpoints (`saves` = Infinity when
 * unknown). keep_model_last keeps the newest Km directories (0: all); keep_optim_last keeps
 * optimizer state in the newest Ko of those (0: all). Retention runs once a save is complete,
 * so the peak is the retained set before the save plus the whole new checkpoint. Pure.
 */
function underRetention(
  keepOptimLast: number,
  keepModelLast: number,
  saves: number,
  bytes: { model: number; optimizer: number; rest: number },
): RetentionFootprint {
  const keptDirs = (n: number) => (keepModelLast === 0 ? n : Math.min(keepModelLast, n));
  const keptOptim = (dirs: number) => (keepOptimLast === 0 ? dirs : Math.min(keepOptimLast, dirs));
  const perDir = bytes.model + bytes.rest;
  const growthPerSave = keepModelLast === 0 ? perDir + (keepOptimLast === 0 ? bytes.optimizer : 0) : 0;
  const disk = (n: number): number | null => {
    const dirs = keptDirs(n);
    return Number.isFinite(dirs) ? dirs * perDir + keptOptim(dirs) * bytes.optimizer : null;
  };
  const after = disk(saves);
  const before = disk(saves - 1);
  return {
    keepOptimLast,
    keepModelLast,
    checkpoints: Number.isFinite(keptDirs(saves)) ? keptDirs(saves) : null,
    withOptimizer: Number.isFinite(keptDirs(saves)) ? keptOptim(keptDirs(saves)) : null,
    bytesAfterSave: after,
    peakBytes: before === null ? null : before + perDir + bytes.optimizer,
    growthPerSave,
  };
}

/**
 * Bytes per component and per checkpoint, and disk use per retention setting, for a model of
 * `params` parameters. An estimate from tensor sizes alone: `assumptions` says what is counted.
 * Pure.
 */
export function estimateFootprint(input: FootprintInput): FootprintEstimate {
  const dtype = input.dtype ?? "bf16";
  const optimizer = input.optimizer ?? "adamw";
  const stateDtype = input.stateDtype ?? "fp32";
  const components = (input.components ?? LOGICAL_COMPONENTS).map(logicalComponentName);
  if (!Number.isSafeInteger(input.params) || input.params < 1 || input.params > MAX_PARAMS) {
    throw bad(`params ${String(input.params)} is not a whole number from 1 to 1e15.`);
  }
  if (!Object.hasOwn(WEIGHT_DTYPE_BYTES, dtype))
    throw bad(`dtype ${dtype} is not one of ${Object.keys(WEIGHT_DTYPE_BYTES).join(", ")}.`);
  if (!Object.hasOwn(OPTIMIZER_STATES, optimizer))
    throw bad(`optimizer ${optimizer} is not one of ${Object.keys(OPTIMIZER_STATES).join(", ")}.`);
  if (!Object.hasOwn(STATE_DTYPE_BYTES, stateDtype))
    throw bad(`state dtype ${stateDtype} is not one of ${Object.keys(STATE_DTYPE_BYTES).join(", ")}.`);
  const unknown = components.filter((c) => !(LOGICAL_COMPONENTS as readonly string[]).includes(c));
  if (components.length === 0 || unknown.length > 0 || new Set(components).size !== components.length) {
    throw bad(
      `components ${components.join(",") || "(none)"} must be distinct names from ${LOGICAL_COMPONENTS.join(", ")}.`,
    );
  }
  requireCount(input.keepOptimLast, "keep_optim_last");
  requireCount(input.keepModelLast, "keep_model_last");
  if (input.iterations !== undefined && !(Number.isSafeInteger(input.iterations) && input.iterations >= 1)) {
    throw bad(`iterations ${String(input.iterations)} is not a whole number >= 1.`);
  }
  requireCount(input.trainingStateBytes, "training state bytes");

  const { params } = input;
  const weights = params * WEIGHT_DTYPE_BYTES[dtype];
  const state = OPTIMIZER_STATES[optimizer];
  const all: Record<LogicalComponent, number> = {
    model: weights * (input.ema ? 2 : 1),
    optimizer: params * (state.tensors * STATE_DTYPE_BYTES[stateDtype] + (input.masterWeights ? 4 : 0)),
    training_state: input.trainingStateBytes ?? DEFAULT_TRAINING_STATE_BYTES,
  };
  const selected = LOGICAL_COMPONENTS.filter((c) => components.includes(c));
  const bytes = Object.fromEntries(selected.map((c) => [c, all[c]])) as Partial<
    Record<LogicalComponent, number>
  >;
  const perCheckpoint = selected.reduce((sum, c) => sum + all[c], 0);
  const artifact = selected.length < LOGICAL_COMPONENTS.length;
  const saves = input.iterations ?? Number.POSITIVE_INFINITY;

  const split = { model: bytes.model ?? 0, optimizer: bytes.optimizer ?? 0, rest: bytes.training_state ?? 0 };
  const requested = { o: input.keepOptimLast ?? 1, m: input.keepModelLast ?? 0 };
  const settings = artifact
    ? [{ o: 0, m: 0 }] // artifacts are outside retention: every one stays
    : [requested, { o: 0, m: 0 }, { o: 1, m: 0 }].filter(
        (s, i, list) => list.findIndex((t) => t.o === s.o && t.m === s.m) === i,
      );
  const assumptions = [
    `weights: ${params} parameters × ${WEIGHT_DTYPE_BYTES[dtype]} bytes (${dtype})${input.ema ? ", twice: model.pt also holds a maintained EMA copy" : ""}`,
    `optimizer (${optimizer}): ${state.what}, ${STATE_DTYPE_BYTES[stateDtype]} bytes each (${stateDtype})` +
      (input.masterWeights
        ? ", plus an fp32 master copy of the weights (4 bytes per parameter)"
        : "; no fp32 master copy of the weights (pass masterWeights / --master-weights when the optimizer keeps one)"),
    `training state: ${all.training_state} bytes (trainer.pt clocks, RNG and scheduler state, data.pt cursor); gradients are never saved`,
    "tensor bytes only: file-format overhead (zip headers, pickles, DCP .metadata) adds well under 1%; no compression",
    artifact
      ? "a partial component plan writes artifacts under checkpoint_artifacts/, which retention never removes: every save stays until released (prune-verified)"
      : "retention (keep_optim_last, keep_model_last) runs after each save completes, so a save needs the retained set plus one whole checkpoint",
  ];
  return {
    estimate: true,
    params,
    components: bytes,
    perCheckpoint,
    artifact,
    retention: settings.map((s) => underRetention(s.o, s.m, saves, split)),
    writtenOverRun: input.iterations === undefined ? null : input.iterations * perCheckpoint,
    assumptions,
  };
}
