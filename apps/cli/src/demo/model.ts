// The demo's model: a two-block residual MLP on a synthetic regression task, trained with AdamW,
// all in Float32 on the CPU. Small enough to train for a few hundred steps in well under a second,
// real enough that its checkpoint holds weights, optimizer moments and a step counter that resume
// must restore exactly. Parameter names follow Hugging Face conventions so the same state dict
// can be merged against, and materialized into, a Hugging Face directory.

export const INPUT_DIM = 16;
export const HIDDEN_DIM = 96;
export const OUTPUT_DIM = 4;
export const LAYERS = 2;

export interface ParamSpec {
  readonly name: string;
  readonly shape: readonly [number, number];
}

/** Every parameter, in state-dict order. */
export const PARAM_SPECS: readonly ParamSpec[] = [
  ...Array.from({ length: LAYERS }, (_, i) => [
    { name: `model.layers.${i}.mlp.up_proj.weight`, shape: [HIDDEN_DIM, INPUT_DIM] as const },
    { name: `model.layers.${i}.mlp.down_proj.weight`, shape: [INPUT_DIM, HIDDEN_DIM] as const },
  ]).flat(),
  { name: "lm_head.weight", shape: [OUTPUT_DIM, INPUT_DIM] },
];

export type Params = Map<string, Float32Array>;

interface AdamState {
  readonly expAvg: Params;
  readonly expAvgSq: Params;
}

const ADAMW = { lr: 3e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 } as const;
const BATCH = 32;

/** A small deterministic generator (mulberry32): the same numbers for the same seed on every machine. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const size = (spec: ParamSpec) => spec.shape[0] * spec.shape[1];

/** Initial weights (scaled uniform), a function of the seed only. */
export function initParams(seed: number): Params {
  const next = rng(seed);
  const params: Params = new Map();
  for (const spec of PARAM_SPECS) {
    const scale = 1 / Math.sqrt(spec.shape[1]);
    params.set(
      spec.name,
      Float32Array.from({ length: size(spec) }, () => (next() * 2 - 1) * scale),
    );
  }
  return params;
}

function zeros(): Params {
  return new Map(PARAM_SPECS.map((s) => [s.name, new Float32Array(size(s))]));
}

/** The task: y = A · sin(x) for a fixed A drawn from `taskSeed`; each step's batch depends on (dataSeed, step). */
export interface Task {
  readonly a: Float32Array; // [OUTPUT_DIM, INPUT_DIM]
  readonly dataSeed: number;
}

export function makeTask(taskSeed: number, dataSeed: number): Task {
  const next = rng(taskSeed);
  return { a: Float32Array.from({ length: OUTPUT_DIM * INPUT_DIM }, () => next() * 2 - 1), dataSeed };
}

function batch(task: Task, step: number): { x: Float32Array; y: Float32Array } {
  const next = rng((task.dataSeed * 1_000_003 + step) >>> 0);
  const x = Float32Array.from({ length: BATCH * INPUT_DIM }, () => next() * 4 - 2);
  const y = new Float32Array(BATCH * OUTPUT_DIM);
  for (let b = 0; b < BATCH; b++) {
    for (let o = 0; o < OUTPUT_DIM; o++) {
      let s = 0;
      for (let i = 0; i < INPUT_DIM; i++) s += task.a[o * INPUT_DIM + i]! * Math.sin(x[b * INPUT_DIM + i]!);
      y[b * OUTPUT_DIM + o] = s;
    }
  }
  return { x, y };
}

/** out[b, r] = Σ_c w[r, c] · in[b, c] */
function matmulT(input: Float32Array, w: Float32Array, rows: number, cols: number): Float32Array {
  const n = input.length / cols;
  const out = new Float32Array(n * rows);
  for (let b = 0; b < n; b++) {
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let c = 0; c < cols; c++) s += w[r * cols + c]! * input[b * cols + c]!;
      out[b * rows + r] = s;
    }
  }
  return out;
}

/** Loss and gradients of the mean squared error on one batch. */
function lossAndGrads(params: Params, x: Float32Array, y: Float32Array): { loss: number; grads: Params } {
  const grads = zeros();
  const hs: Float32Array[] = [x];
  const acts: Float32Array[] = [];
  let h = x;
  for (let l = 0; l < LAYERS; l++) {
    const up = params.get(`model.layers.${l}.mlp.up_proj.weight`)!;
    const down = params.get(`model.layers.${l}.mlp.down_proj.weight`)!;
    const a = matmulT(h, up, HIDDEN_DIM, INPUT_DIM).map((v) => Math.max(v, 0));
    const d = matmulT(a, down, INPUT_DIM, HIDDEN_DIM);
    h = h.map((v, i) => v + d[i]!);
    acts.push(a);
    hs.push(h);
  }
  const head = params.get("lm_head.weight")!;
  const pred = matmulT(h, head, OUTPUT_DIM, INPUT_DIM);
  const n = x.length / INPUT_DIM;
  let loss = 0;
  const dPred = new Float32Array(pred.length);
  for (let i = 0; i < pred.length; i++) {
    const diff = pred[i]! - y[i]!;
    loss += diff * diff;
    dPred[i] = (2 * diff) / pred.length;
  }
  loss /= pred.length;
  const accumulateOuter = (
    g: Float32Array,
    dOut: Float32Array,
    input: Float32Array,
    rows: number,
    cols: number,
  ) => {
    for (let b = 0; b < n; b++) {
      for (let r = 0; r < rows; r++) {
        const go = dOut[b * rows + r]!;
        if (go === 0) continue;
        for (let c = 0; c < cols; c++) g[r * cols + c]! += go * input[b * cols + c]!;
      }
    }
  };
  const backThrough = (dOut: Float32Array, w: Float32Array, rows: number, cols: number) => {
    const dIn = new Float32Array(n * cols);
    for (let b = 0; b < n; b++) {
      for (let r = 0; r < rows; r++) {
        const go = dOut[b * rows + r]!;
        if (go === 0) continue;
        for (let c = 0; c < cols; c++) dIn[b * cols + c]! += go * w[r * cols + c]!;
      }
    }
    return dIn;
  };
  accumulateOuter(grads.get("lm_head.weight")!, dPred, h, OUTPUT_DIM, INPUT_DIM);
  let dH = backThrough(dPred, head, OUTPUT_DIM, INPUT_DIM);
  for (let l = LAYERS - 1; l >= 0; l--) {
    const up = params.get(`model.layers.${l}.mlp.up_proj.weight`)!;
    const down = params.get(`model.layers.${l}.mlp.down_proj.weight`)!;
    const a = acts[l]!;
    accumulateOuter(grads.get(`model.layers.${l}.mlp.down_proj.weight`)!, dH, a, INPUT_DIM, HIDDEN_DIM);
    const dA = backThrough(dH, down, INPUT_DIM, HIDDEN_DIM).map((v, i) => (a[i]! > 0 ? v : 0));
    accumulateOuter(grads.get(`model.layers.${l}.mlp.up_proj.weight`)!, dA, hs[l]!, HIDDEN_DIM, INPUT_DIM);
    const dIn = backThrough(dA, up, HIDDEN_DIM, INPUT_DIM);
    dH = dH.map((v, i) => v + dIn[i]!); // the residual path
  }
  return { loss, grads };
}

/** One AdamW step (decoupled weight decay, bias-corrected moments); `step` counts from 1. */
function adamw(params: Params, grads: Params, state: AdamState, step: number): void {
  const { lr, beta1, beta2, eps, weightDecay } = ADAMW;
  const c1 = 1 - beta1 ** step;
  const c2 = 1 - beta2 ** step;
  for (const [name, w] of params) {
    const g = grads.get(name)!;
    const m = state.expAvg.get(name)!;
    const v = state.expAvgSq.get(name)!;
    for (let i = 0; i < w.length; i++) {
      w[i]! *= 1 - lr * weightDecay;
      m[i] = beta1 * m[i]! + (1 - beta1) * g[i]!;
      v[i] = beta2 * v[i]! + (1 - beta2) * g[i]! * g[i]!;
      w[i]! -= (lr * (m[i]! / c1)) / (Math.sqrt(v[i]! / c2) + eps);
    }
  }
}

/** The full training state: what a checkpoint must restore for an exact resume. */
export interface TrainState {
  params: Params;
  adam: AdamState;
  /** Optimizer steps taken so far (the iteration). */
  step: number;
  loss: number;
}

export function freshState(seed: number): TrainState {
  return {
    params: initParams(seed),
    adam: { expAvg: zeros(), expAvgSq: zeros() },
    step: 0,
    loss: Number.NaN,
  };
}

/** Trains one step in place. */
export function trainStep(state: TrainState, task: Task): void {
  const { x, y } = batch(task, state.step);
  const { loss, grads } = lossAndGrads(state.params, x, y);
  state.step += 1;
  adamw(state.params, grads, state.adam, state.step);
  state.loss = loss;
}

/** Mean loss over a fixed held-out batch set (the demo's "validation"). */
export function validationLoss(params: Params, task: Task): number {
  const held: Task = { a: task.a, dataSeed: task.dataSeed + 7919 };
  let total = 0;
  for (let i = 0; i < 4; i++) {
    const { x, y } = batch(held, i);
    total += lossAndGrads(params, x, y).loss;
  }
  return total / 4;
}
