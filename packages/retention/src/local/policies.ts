import { RetentionError } from "../errors.js";

/** Whether a full checkpoint's upload left a receipt: none, a legacy one-line marker, or a JSON receipt. */
export type UploadState = "none" | "legacy" | "receipt";

/** One entry of an iteration directory as its listing shows it (a symbolic link is `other`: never followed). */
export interface CheckpointEntry {
  readonly name: string;
  readonly kind: "file" | "dir" | "other";
}

/** What retention knows about one `checkpoints/iter_*` directory. Gathered by `scanCheckpointRoot`. */
export interface CheckpointInfo {
  readonly iteration: number;
  /** The iteration directory (absolute when gathered by the scanner). */
  readonly dir: string;
  /** `optim.pt` or `optim/` is present. */
  readonly hasOptimizer: boolean;
  readonly uploaded: UploadState;
  /** Metrics recorded with the checkpoint (e.g. a validation loss), used by `bestN`. */
  readonly metrics?: Readonly<Record<string, number>>;
  /** `latest_checkpoint.txt` names this directory: the resume source, never removed by a planner. */
  readonly isLatest?: boolean;
  /**
   * The directory's own entries as the scan listed them (absent when not gathered by the scanner,
   * empty when it vanished meanwhile), so a reader can tell its layout without listing it again.
   */
  readonly entries?: readonly CheckpointEntry[];
}

/**
 * A retention policy: one keep flag per checkpoint, in the order given. Policies are pure and
 * compose with `anyOf` / `allOf`; `label` says what the policy keeps, for reports.
 */
export interface RetentionPolicy {
  (infos: readonly CheckpointInfo[]): boolean[];
  readonly label: string;
}

function policy(label: string, decide: (infos: readonly CheckpointInfo[]) => boolean[]): RetentionPolicy {
  return Object.assign((infos: readonly CheckpointInfo[]) => decide(infos), { label });
}

function requireCount(value: number, what: string, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RetentionError(
      "RETENTION_BAD_ARGUMENT",
      `${what} must be an integer >= ${min}, not ${String(value)}.`,
      { kind: "input" },
    );
  }
}

/** Indices ordered newest first (higher iteration first; equal iterations by directory name, descending). */
export function newestFirst(infos: readonly CheckpointInfo[]): number[] {
  return infos
    .map((_, i) => i)
    .sort((a, b) => {
      const x = infos[a]!;
      const y = infos[b]!;
      if (x.iteration !== y.iteration) return y.iteration - x.iteration;
      return x.dir < y.dir ? 1 : x.dir > y.dir ? -1 : 0;
    });
}

/** Keeps everything: the default. */
export function keepAll(): RetentionPolicy {
  return policy("all", (infos) => infos.map(() => true));
}

/** Keeps the `n` newest checkpoints by iteration (`n = 0` keeps none). */
export function latestN(n: number): RetentionPolicy {
  requireCount(n, "latestN(n): n", 0);
  return policy(`latest ${n}`, (infos) => {
    const keep = infos.map(() => false);
    for (const i of newestFirst(infos).slice(0, n)) keep[i] = true;
    return keep;
  });
}

/** Keeps checkpoints whose iteration is a multiple of `n` (milestones). */
export function everyNSteps(n: number): RetentionPolicy {
  requireCount(n, "everyNSteps(n): n", 1);
  return policy(`every ${n} steps`, (infos) => infos.map((info) => info.iteration % n === 0));
}

export interface BestNOptions {
  /** A metric name recorded with the checkpoints. */
  readonly metric: string;
  readonly n: number;
  /** `min`: lower is better (a loss); `max`: higher is better (an accuracy). */
  readonly mode: "min" | "max";
}

/**
 * Keeps the `n` checkpoints with the best value of `metric`. A checkpoint without that metric (or
 * with a non-finite value) is never among the best. Ties go to the newer iteration.
 */
export function bestN(options: BestNOptions): RetentionPolicy {
  const { metric, n, mode } = options;
  requireCount(n, "bestN({ n }): n", 0);
  if (typeof metric !== "string" || metric === "") {
    throw new RetentionError("RETENTION_BAD_ARGUMENT", "bestN({ metric }): name the metric to rank by.", {
      kind: "input",
    });
  }
  if (mode !== "min" && mode !== "max") {
    throw new RetentionError(
      "RETENTION_BAD_ARGUMENT",
      `bestN({ mode }): mode must be "min" or "max", not ${JSON.stringify(mode)}.`,
      { kind: "input" },
    );
  }
  return policy(`best ${n} by ${metric} (${mode})`, (infos) => {
    const order = newestFirst(infos);
    const ranked = order.filter((i) => Number.isFinite(infos[i]!.metrics?.[metric]));
    const value = (i: number) => infos[i]!.metrics![metric]!;
    // A stable sort over newest-first order, so equal values keep the newer checkpoint first.
    ranked.sort((a, b) => (mode === "min" ? value(a) - value(b) : value(b) - value(a)));
    const keep = infos.map(() => false);
    for (const i of ranked.slice(0, n)) keep[i] = true;
    return keep;
  });
}

/** Checks a policy's answer: one boolean per checkpoint. */
export function evaluatePolicy(p: RetentionPolicy, infos: readonly CheckpointInfo[]): boolean[] {
  const flags = p(infos);
  if (!Array.isArray(flags) || flags.length !== infos.length || flags.some((f) => typeof f !== "boolean")) {
    throw new RetentionError(
      "RETENTION_POLICY_RESULT",
      `retention policy ${p.label ?? "(unnamed)"} did not return one boolean per checkpoint ` +
        `(${infos.length} expected). A policy maps (infos) => boolean[] in the same order.`,
      { kind: "input" },
    );
  }
  return flags;
}

function combine(name: string, policies: readonly RetentionPolicy[], all: boolean): RetentionPolicy {
  if (policies.length === 0) {
    throw new RetentionError(
      "RETENTION_BAD_ARGUMENT",
      `${name}() needs at least one policy; use keepAll() to keep everything.`,
      { kind: "input" },
    );
  }
  return policy(`${name}(${policies.map((p) => p.label).join(", ")})`, (infos) => {
    const answers = policies.map((p) => evaluatePolicy(p, infos));
    return infos.map((_, i) => (all ? answers.every((a) => a[i]) : answers.some((a) => a[i])));
  });
}

/** Keeps what any of the policies keeps. */
export function anyOf(...policies: RetentionPolicy[]): RetentionPolicy {
  return combine("anyOf", policies, false);
}

/** Keeps only what every one of the policies keeps. */
export function allOf(...policies: RetentionPolicy[]): RetentionPolicy {
  return combine("allOf", policies, true);
}
