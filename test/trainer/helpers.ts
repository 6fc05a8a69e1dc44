// Running the example PyTorch trainer (apps/trainer-binding/examples/train_mlp.py) through the
// built ckpt-trainer sidecar, and checking what it left on disk independently of the manager.
import { existsSync } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { CHECKPOINTS_DIR, LATEST_POINTER, ManifestError, parseRunTs } from "@ckpt/manifest";
import { verifyTensorFile } from "@ckpt/tensors";
import { TORCH_PYTHON } from "@ckpt/test-utils";
import { type NodeCommand, REPO_ROOT, type RunResult, runNode } from "../helpers/crash.js";

/** The torch interpreter (test-utils' TORCH_PYTHON). */
export const PYTHON = TORCH_PYTHON;
/**
 * The built sidecar, or `$CKPT_TRAINER_BIN_JS` (a pinned copy, e.g. a bundle, so a rebuild of the
 * workspace during a long local run cannot pull files from under it).
 */
export const TRAINER_BIN =
  process.env.CKPT_TRAINER_BIN_JS ?? join(REPO_ROOT, "apps", "trainer-binding", "dist", "bin.js");
const EXAMPLE_TRAINER = join(REPO_ROOT, "apps", "trainer-binding", "examples", "train_mlp.py");
/** The example's default project/group/name. */
const RUN_PATH = ["demo", "mlp", "run"] as const;

export interface TrainOptions {
  readonly outputRoot: string;
  readonly steps: number;
  readonly saveEvery: number;
  readonly result: string;
  readonly stepMs?: number;
  readonly writePauseMs?: number;
  /** Further checkpoint knobs (JSON object). */
  readonly config?: Record<string, unknown>;
  /** Held-out validation every N steps (the example's --validate-every). */
  readonly validateEvery?: number;
  readonly env?: NodeJS.ProcessEnv;
}

/** The trainer's argv (without the interpreter). */
export function trainArgs(o: TrainOptions): string[] {
  return [
    EXAMPLE_TRAINER,
    "--output-root",
    o.outputRoot,
    "--steps",
    String(o.steps),
    "--save-every",
    String(o.saveEvery),
    "--step-ms",
    String(o.stepMs ?? 0),
    "--write-pause-ms",
    String(o.writePauseMs ?? 0),
    "--config-json",
    JSON.stringify(o.config ?? {}),
    "--result",
    o.result,
    ...(o.validateEvery === undefined ? [] : ["--validate-every", String(o.validateEvery)]),
  ];
}

/** The environment that makes the client spawn the built sidecar. */
export function trainerEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { CKPT_TRAINER_BIN: `${process.execPath} ${TRAINER_BIN}`, PYTHONUNBUFFERED: "1", ...extra };
}

/** One run of the example trainer as a crash-harness command. */
export function trainCommand(o: TrainOptions): NodeCommand {
  return { executable: PYTHON, args: trainArgs(o), env: trainerEnv(o.env) };
}

export function runTrainer(o: TrainOptions, timeoutMs = 180_000): Promise<RunResult> {
  return runNode(trainCommand(o), { timeoutMs });
}

export interface TrainResult {
  readonly step: number;
  /** SHA-256 over every parameter's name and bytes: equal digests are bit-identical weights. */
  readonly digest: string;
  readonly stopped: string | null;
  readonly resumed_from: string | null;
  readonly attempt_dir: string;
  /** The held-out validations this run performed. */
  readonly validations?: ReadonlyArray<{ readonly step: number; readonly loss: number }>;
}

export async function readResult(path: string): Promise<TrainResult> {
  return JSON.parse(await readFile(path, "utf8")) as TrainResult;
}

/** The run attempts (RUN_TS directories) under the example's run directory, oldest first. */
export async function attemptDirs(outputRoot: string): Promise<string[]> {
  const runDir = join(outputRoot, ...RUN_PATH);
  try {
    const names = await readdir(runDir);
    return names
      .filter((n) => parseRunTs(n) !== undefined)
      .sort()
      .map((n) => join(runDir, n));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}

async function isDirectory(path: string): Promise<boolean | undefined> {
  try {
    return (await stat(path)).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** A torch.save file must open, every zip member's CRC-32 must match and every float be finite. */
async function readWholeTorchFile(path: string): Promise<void> {
  const report = await verifyTensorFile(path, { format: "torch", crc: true, finite: true });
  if (report.problems.length > 0) {
    throw new Error(`${path}: ${report.problems.map((p) => `${p.code} ${p.message}`).join("; ")}`);
  }
}

/**
 * Proves a checkpoint directory complete without the manager's help: every component of the full
 * plan is there, each torch.save file opens, every zip member matches its CRC-32 and every float
 * is finite. Throws naming what is missing or torn.
 */
async function assertCompleteCheckpoint(iterDir: string): Promise<void> {
  for (const name of ["model", "optim", "trainer", "data"]) {
    const file = join(iterDir, `${name}.pt`);
    if ((await isDirectory(file)) !== false) throw new Error(`${iterDir}: component ${name} is missing`);
    await readWholeTorchFile(file);
  }
}

/**
 * The latest pointer of an attempt: absent, or naming a directory that must be complete (checked
 * by `assertCompleteCheckpoint`). A pointer that does not parse is a failure.
 */
export async function checkLatestPointer(
  attemptDir: string,
): Promise<{ iteration: number; dir: string } | undefined> {
  const root = join(attemptDir, CHECKPOINTS_DIR);
  let pointer: { iterDirName: string; iteration: number };
  try {
    pointer = await LATEST_POINTER.read(join(root, LATEST_POINTER.fileName));
  } catch (error) {
    if (error instanceof ManifestError && error.code === "RECORD_NOT_FOUND") return undefined;
    throw error;
  }
  const dir = join(root, pointer.iterDirName);
  await assertCompleteCheckpoint(dir);
  return { iteration: pointer.iteration, dir };
}

/** The iter_* directories of an attempt's checkpoints/ root, by iteration. */
export async function iterationDirs(attemptDir: string): Promise<Map<number, string>> {
  const root = join(attemptDir, CHECKPOINTS_DIR);
  const found = new Map<number, string>();
  let names: string[] = [];
  try {
    names = await readdir(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  for (const name of names) {
    const m = /^iter_(\d+)$/.exec(name);
    if (m) found.set(Number(m[1]), join(root, name));
  }
  return found;
}

/** Resolves once the attempt's first checkpoint is committed (training is under way). */
export async function firstCheckpoint(outputRoot: string, timeoutMs = 120_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [attempt] = await attemptDirs(outputRoot);
    // Only the pointer is read: the live run may be pruning older iterations meanwhile.
    const pointer =
      attempt === undefined ? undefined : join(attempt, CHECKPOINTS_DIR, LATEST_POINTER.fileName);
    if (pointer !== undefined && existsSync(pointer)) return (await LATEST_POINTER.read(pointer)).iteration;
    if (Date.now() > deadline) throw new Error(`no checkpoint under ${outputRoot} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A run long enough to be stopped part-way: 40 steps of 50 ms, a checkpoint every 8. */
export function stoppableRun(outputRoot: string, env: NodeJS.ProcessEnv = {}): TrainOptions {
  return { outputRoot, steps: 40, saveEvery: 8, stepMs: 50, result: join(outputRoot, "result.json"), env };
}

/** Runs the trainer from scratch to the end and returns its final weights' digest. */
export async function uninterruptedDigest(o: TrainOptions): Promise<string> {
  const run = await runTrainer(o);
  if (run.code !== 0) throw new Error(`the uninterrupted run failed:\n${run.stderr.slice(-3000)}`);
  const result = await readResult(o.result);
  if (result.resumed_from !== null || result.step !== o.steps) {
    throw new Error(`the uninterrupted run resumed or stopped early: ${JSON.stringify(result)}`);
  }
  return result.digest;
}

/**
 * After a stop request: the run stopped before its last step because of the sentinel file, and
 * latest_checkpoint.txt names its emergency checkpoint, complete on disk. Returns the step.
 */
export async function expectEmergencyCheckpoint(o: TrainOptions): Promise<number> {
  const stopped = await readResult(o.result);
  if (!stopped.stopped?.includes("SIGUSR1_RECEIVED") || stopped.step >= o.steps) {
    throw new Error(`expected a stop on the sentinel before step ${o.steps}: ${JSON.stringify(stopped)}`);
  }
  const [attempt] = await attemptDirs(o.outputRoot);
  const latest = attempt === undefined ? undefined : await checkLatestPointer(attempt);
  if (latest?.iteration !== stopped.step) {
    throw new Error(`latest checkpoint is ${latest?.iteration}, the emergency save was at ${stopped.step}`);
  }
  return stopped.step;
}

/** After the requeued run: it resumed from `from`, finished every step and matches `reference`. */
export async function expectResumedToEnd(o: TrainOptions, from: number, reference: string): Promise<void> {
  const done = await readResult(o.result);
  const resumedAt = done.resumed_from === null ? undefined : iterationOfDir(done.resumed_from);
  if (resumedAt !== from || done.step !== o.steps || done.stopped !== null || done.digest !== reference) {
    throw new Error(
      `expected a resume from iteration ${from} to step ${o.steps} with digest ${reference}: ${JSON.stringify(done)}`,
    );
  }
}

function iterationOfDir(dir: string): number | undefined {
  const m = /iter_(\d+)\/?$/.exec(dir);
  return m ? Number(m[1]) : undefined;
}
