// The demo's script: one real training job and everything that happens to its checkpoints, each
// step done by the library that owns it. A failed step says why and the steps that need its result
// are skipped; nothing is simulated.
import { readFile } from "node:fs/promises";
import { basename, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { ResumeDecision } from "@ckpt/trainer-checkpoint-manager";
import { DemoError } from "./errors.js";
import { type DemoFault, type InjectedFault, tearComponent, truncateShard } from "./faults.js";
import { writeHfBase } from "./hf-base.js";
import { initParams, PARAM_SPECS } from "./model.js";
import type { TrainResult } from "./train.js";
import type { WorkerOutcome, WorkerSpec } from "./worker.js";

const DEMO_REPORT_SCHEMA = "ckpt.demo-report.v1";

type StepStatus = "ok" | "skipped" | "failed";

/**
 * What retention removed, short: whole checkpoints by iteration, then component files by name for
 * the checkpoints that stayed (`iter 20; optim.pt of iter 40`). Pure.
 */
export function retentionSummary(removed: readonly string[]): string {
  const iteration = (dir: string) => Number(dir.replace(/^iter_0*/, "") || "0");
  const whole = removed.filter((p) => !p.includes("/"));
  const parts = new Map<string, number[]>();
  for (const path of removed) {
    const [dir, file] = path.split("/", 2);
    if (file === undefined || whole.includes(dir!)) continue;
    parts.set(file, [...(parts.get(file) ?? []), iteration(dir!)]);
  }
  const pieces = [
    ...(whole.length > 0 ? [`iter ${whole.map(iteration).join(", ")}`] : []),
    ...[...parts].map(([file, iters]) => `${file} of iter ${iters.join(", ")}`),
  ];
  return `retention removed ${pieces.length === 0 ? "nothing" : pieces.join("; ")}`;
}

interface DemoStep {
  readonly id: string;
  readonly title: string;
  status: StepStatus;
  /** One line a person reads. */
  summary: string;
  ms: number;
  error?: { readonly code: string; readonly message: string };
}

/** What resume did about the fault: the manager's decision, or its refusal. */
interface DemoResume {
  readonly fault: InjectedFault;
  readonly decision:
    | {
        readonly kind: "checkpoint";
        readonly iteration: number | null;
        readonly dir: string;
        readonly reason: string;
      }
    | { readonly kind: "fresh"; readonly reason: string }
    | { readonly kind: "refused"; readonly code: string; readonly reason: string };
  /** Whether the trainer could load what the manager chose (absent when it chose nothing). */
  readonly load?:
    | { readonly ok: true }
    | { readonly ok: false; readonly code: string; readonly reason: string };
  /** Where training stood after resuming (undefined when resume refused or loading failed). */
  readonly continued_to?: number;
}

interface InventoryRow {
  readonly what: string;
  /** Relative to the demo directory. */
  readonly where: string;
  readonly bytes: number;
  readonly sha256: string | null;
  /** How the bytes were proven, or why not. */
  readonly verified: string;
}

export interface DemoReport {
  readonly schema: typeof DEMO_REPORT_SCHEMA;
  ok: boolean;
  /** Every step ran (none skipped). */
  complete: boolean;
  readonly dir: string;
  readonly fault: DemoFault;
  readonly steps: DemoStep[];
  resume: DemoResume | null;
  readonly inventory: InventoryRow[];
  wall_ms: number;
}

type DemoEvent =
  | { readonly type: "step"; readonly step: DemoStep; readonly index: number; readonly total: number }
  | { readonly type: "progress"; readonly label: string; readonly done: number; readonly total: number };

export interface DemoOptions {
  readonly dir: string;
  readonly fault: DemoFault;
  readonly onEvent?: (event: DemoEvent) => void;
}

// The validation artifact (iteration 30) sits behind the last complete checkpoint a kill can leave
// (40), so resume is not refused for being behind a committed artifact.
const MAIN = { name: "main", steps: 60, saveEvery: 20, keepOptimLast: 2, keepModelLast: 3, validateAt: [30] };
const RESUMED_TO = 80;
const EXPERT_STEPS = 30;
const SEEDS = { init: 1, task: 11, data: 101 };

const STEP_TITLES = [
  ["base", "build a tiny Hugging Face base (safetensors shards, index, config, tokenizer)"],
  ["train", "train the MLP in a child process: saves, a validation artifact, retention"],
  ["fault", "inject the fault"],
  ["resume", "resume: the manager decides where training continues"],
  ["publish", "publish the model-only artifact to the file:// archive"],
  ["verify", "verify the archive against the receipt"],
  ["fetch", "fetch the artifact into a stage"],
  ["prune", "prune-verified: free the local payload"],
  ["experts", "train two short expert runs"],
  ["merge", "merge the experts (task vectors onto the base)"],
  ["materialize", "materialize a Hugging Face directory from the merge"],
] as const;
type StepId = (typeof STEP_TITLES)[number][0];
export const DEMO_STEP_COUNT = STEP_TITLES.length;

/** Runs the demo in a directory `prepareDemoDir` made ready. */
export async function runDemo(options: DemoOptions): Promise<DemoReport> {
  const started = Date.now();
  const dir = resolve(options.dir);
  const paths = {
    runs: join(dir, "runs"),
    archive: join(dir, "archive"),
    stage: join(dir, "stage"),
    base: join(dir, "hf-base"),
    mergeOut: join(dir, "merge", "checkpoint_artifacts", "iter_000000030", "model.pt"),
    hfOut: join(dir, "hf-model"),
  };
  const report: DemoReport = {
    schema: DEMO_REPORT_SCHEMA,
    ok: true,
    complete: true,
    dir,
    fault: options.fault,
    steps: [],
    resume: null,
    inventory: [],
    wall_ms: 0,
  };
  const rel = (p: string) => relative(dir, p) || ".";
  const done = new Set<StepId>();
  const run = async (id: StepId, needs: readonly StepId[], body: () => Promise<string>): Promise<void> => {
    const title = STEP_TITLES.find(([s]) => s === id)![1];
    const step: DemoStep = { id, title, status: "ok", summary: "", ms: 0 };
    const t0 = Date.now();
    const missing = needs.filter((n) => !done.has(n));
    if (missing.length > 0) {
      step.status = "skipped";
      step.summary = `skipped: needs ${missing.join(", ")}`;
    } else {
      try {
        step.summary = await body();
        done.add(id);
      } catch (error) {
        step.status = "failed";
        const e = error as { code?: string; message?: string };
        step.error = { code: e.code ?? "INTERNAL", message: e.message ?? String(error) };
        step.summary = `failed: ${step.error.message}`;
      }
    }
    step.ms = Date.now() - t0;
    report.steps.push(step);
    options.onEvent?.({ type: "step", step, index: report.steps.length, total: STEP_TITLES.length });
  };

  const trainBase: Omit<WorkerSpec, "name" | "steps" | "pauseInSaveAt"> = {
    outputRoot: paths.runs,
    saveEvery: MAIN.saveEvery,
    keepOptimLast: MAIN.keepOptimLast,
    keepModelLast: MAIN.keepModelLast,
    initSeed: SEEDS.init,
    taskSeed: SEEDS.task,
    dataSeed: SEEDS.data,
  };

  // --- base
  await run("base", [], async () => {
    const base = await writeHfBase(paths.base, initParams(SEEDS.init));
    return `${base.files.length} files in ${rel(base.dir)}`;
  });

  // --- the main run, in a child process
  let worker: WorkerOutcome | undefined;
  await run("train", [], async () => {
    const { runTrainWorker } = await import("./worker.js");
    worker = await runTrainWorker(
      {
        ...trainBase,
        name: MAIN.name,
        steps: MAIN.steps,
        validateAt: MAIN.validateAt,
        ...(options.fault === "kill" ? { pauseInSaveAt: MAIN.steps } : {}),
      },
      (line) => {
        if (line.type === "saved") {
          options.onEvent?.({
            type: "progress",
            label: "train",
            done: line.report.iteration,
            total: MAIN.steps,
          });
        }
      },
    );
    const full = worker.saves.filter((s) => s.kind === "full").map((s) => s.iteration);
    const artifacts = worker.saves.filter((s) => s.kind === "artifact").map((s) => s.iteration);
    const removed = worker.saves.flatMap((s) => s.retention?.removed ?? []);
    return (
      `pid ${worker.pid}: full checkpoints at ${full.join(", ") || "none"}; artifact at ${artifacts.join(", ") || "none"}` +
      `; ${retentionSummary(removed)}`
    );
  });

  // --- the fault
  let fault: InjectedFault | undefined;
  await run("fault", ["train"], async () => {
    const w = worker!;
    const newest = [...w.saves].reverse().find((s) => s.kind === "full");
    if (options.fault === "kill") {
      fault = {
        mode: "kill",
        what: `SIGKILLed the trainer (pid ${w.pid}) inside the save of iteration ${w.killedInSave}, after its first component file landed`,
      };
    } else if (options.fault === "clean") {
      fault = { mode: "clean", what: "no fault injected" };
    } else {
      if (newest === undefined)
        throw new DemoError(
          "DEMO_NOTHING_TO_DAMAGE",
          "the trainer committed no full checkpoint to damage",
          "failed",
        );
      fault = options.fault === "torn" ? await tearComponent(newest.dir) : await truncateShard(newest.dir);
    }
    return fault.path ? `${fault.what} (${rel(fault.path)})` : fault.what;
  });

  // --- resume in this process, as the requeued job would
  let resumed: TrainResult | undefined;
  await run("resume", ["fault"], async () => {
    const [{ train }, { ManagerError }] = await Promise.all([
      import("./train.js"),
      import("@ckpt/trainer-checkpoint-manager"),
    ]);
    let decision: ResumeDecision | undefined;
    try {
      resumed = await train({
        ...trainBase,
        name: MAIN.name,
        steps: RESUMED_TO,
        validateAt: [],
        onEvent: (event) => {
          if (event.type === "resume") decision = event.decision;
        },
      });
    } catch (error) {
      const e = error as { code?: string; message?: string };
      if (e.code === undefined) throw error;
      const failure = { code: e.code, reason: e.message ?? "" };
      if (decision === undefined) {
        // Only the manager's own refusals are answers; anything else is a failure of the step.
        if (!(error instanceof ManagerError)) throw error;
        // The manager refused to pick a resume source: that is its answer to the fault.
        report.resume = { fault: fault!, decision: { kind: "refused", ...failure } };
        return `resume refused (${e.code}): ${e.message}`;
      }
      // The manager chose a checkpoint and the trainer could not load it.
      report.resume = {
        fault: fault!,
        decision: describeDecision(decision),
        load: { ok: false, ...failure },
      };
      return `the manager chose ${decision.kind === "checkpoint" ? decision.iterDir : decision.kind}; loading it failed (${e.code}): ${e.message}`;
    }
    report.resume = {
      fault: fault!,
      decision: describeDecision(resumed.resume),
      load: { ok: true },
      continued_to: resumed.finalIteration,
    };
    const d = report.resume.decision;
    const from = d.kind === "checkpoint" ? `iteration ${d.iteration}` : d.kind;
    const removed = resumed.saves.flatMap((s) => s.retention?.removed ?? []);
    return `resumed from ${from}; saved ${resumed.saves.map((s) => s.iteration).join(", ")}; ${retentionSummary(removed)}`;
  });

  // --- the artifact: publish, verify, fetch, prune
  const artifact = worker?.saves.find((s) => s.kind === "artifact");
  let storeUri: string | undefined;
  await run("publish", ["train"], async () => {
    if (artifact === undefined)
      throw new DemoError("DEMO_NO_ARTIFACT", "the trainer committed no artifact", "failed");
    const [{ publishArtifact }, { openStore }, { artifactDestinationUri }] = await Promise.all([
      import("@ckpt/archive-publisher"),
      import("@ckpt/object-store"),
      import("../commands/artifact/publish.js"),
    ]);
    const attempt = resolve(artifact.dir, "..", "..");
    const uploadPrefix = relative(paths.runs, join(attempt, "checkpoints")).split("\\").join("/");
    storeUri = artifactDestinationUri(`file://${paths.archive}`, uploadPrefix, artifact.iteration);
    const store = await openStore(storeUri);
    const published = await publishArtifact(artifact.dir, store);
    const bytes = published.inventory.reduce((s, f) => s + f.size, 0);
    return `${published.status} ${published.inventory.length} files (${bytes} bytes) to ${storeUri}`;
  });
  await run("verify", ["publish"], async () => {
    const [{ verifyReceipt }, { openStore }] = await Promise.all([
      import("@ckpt/archive-reader"),
      import("@ckpt/object-store"),
    ]);
    const verified = await verifyReceipt(artifact!.dir, await openStore(storeUri!));
    if (!verified.ok) {
      const problems = verified.problems.map((p) => `${p.path}: ${p.status}`).join(", ");
      throw new DemoError(
        "DEMO_ARCHIVE_UNSOUND",
        `the archive at ${storeUri} does not match its receipt: ${problems}`,
        "failed",
      );
    }
    return `${verified.objects.length} objects live with the recorded size and SHA-256`;
  });
  await run("fetch", ["verify"], async () => {
    const [{ fetchArtifact }, { openStore }] = await Promise.all([
      import("@ckpt/archive-reader"),
      import("@ckpt/object-store"),
    ]);
    const fetched = await fetchArtifact(await openStore(storeUri!), paths.stage, { uri: storeUri! });
    return `${fetched.files.length} files into ${rel(fetched.stagedDir)}, each digest checked`;
  });
  await run("prune", ["fetch"], async () => {
    const { pruneVerified } = await import("@ckpt/retention");
    const pruned = await pruneVerified([artifact!.dir]);
    if (pruned.errors.length > 0) {
      throw new DemoError("DEMO_PRUNE_FAILED", pruned.errors.map((e) => e.message).join("; "), "failed");
    }
    const files = pruned.removed.flatMap((r) => r.files);
    return `released ${files.join(", ") || "nothing"} (${pruned.freed_bytes} bytes); manifest and receipt stay`;
  });

  // --- experts and merge
  const experts: string[] = [];
  await run("experts", [], async () => {
    const { train } = await import("./train.js");
    for (const [name, task, data] of [
      ["expert-a", 21, 201],
      ["expert-b", 22, 202],
    ] as const) {
      const result = await train({
        ...trainBase,
        name,
        steps: EXPERT_STEPS,
        saveEvery: EXPERT_STEPS,
        taskSeed: task,
        dataSeed: data,
      });
      const full = result.saves.find((s) => s.kind === "full");
      if (full === undefined)
        throw new DemoError("DEMO_NO_CHECKPOINT", `${name} committed no checkpoint`, "failed");
      experts.push(join(full.dir, "model.pt"));
    }
    return `two runs of ${EXPERT_STEPS} steps on different tasks: ${experts.map(rel).join(", ")}`;
  });
  await run("merge", ["base", "experts"], async () => {
    const { mergeExperts } = await import("@ckpt/merge");
    const merged = await mergeExperts({
      mode: "tv",
      experts,
      base: paths.base,
      lam: 0.5,
      out: paths.mergeOut,
    });
    return `${merged.status}: ${merged.tensors} tensors -> ${rel(paths.mergeOut)}`;
  });
  await run("materialize", ["merge"], async () => {
    const { materializeHf } = await import("@ckpt/hf-conversion");
    const made = await materializeHf({
      source: { kind: "local", ckptDir: join(paths.mergeOut, "..") },
      base: paths.base,
      out: paths.hfOut,
      expectTensors: PARAM_SPECS.length,
      minTensors: PARAM_SPECS.length,
    });
    return `${made.action} Hugging Face directory ${rel(paths.hfOut)} (shards, index, config and tokenizer from the base)`;
  });

  const archivedModel = storeUri === undefined ? undefined : join(fileURLToPath(storeUri), "model.pt");
  report.inventory.push(
    ...(await inventory(dir, paths, done, resumed, artifact?.dir, archivedModel, experts)),
  );
  report.ok = report.steps.every((s) => s.status !== "failed");
  report.complete = report.steps.every((s) => s.status === "ok");
  report.wall_ms = Date.now() - started;
  return report;
}

function describeDecision(decision: ResumeDecision): DemoResume["decision"] {
  if (decision.kind === "fresh") return { kind: "fresh", reason: decision.reason };
  return {
    kind: "checkpoint",
    iteration: decision.iteration ?? null,
    dir: decision.iterDir,
    reason: decision.reason,
  };
}

async function digestRow(
  dir: string,
  what: string,
  path: string,
  verified: string,
): Promise<InventoryRow | undefined> {
  const { hashFile } = await import("@ckpt/manifest");
  try {
    const digest = await hashFile(path);
    return { what, where: relative(dir, path), bytes: digest.size, sha256: digest.sha256, verified };
  } catch (error) {
    if (
      (error as { code?: string }).code === "ENOENT" ||
      (error as { cause?: { code?: string } }).cause?.code === "ENOENT"
    ) {
      return undefined;
    }
    throw error;
  }
}

/** What exists where at the end, with digests and how each was proven. */
async function inventory(
  dir: string,
  paths: { base: string; stage: string; mergeOut: string; hfOut: string },
  done: ReadonlySet<StepId>,
  resumed: TrainResult | undefined,
  artifactDir: string | undefined,
  archivedModel: string | undefined,
  experts: readonly string[],
): Promise<InventoryRow[]> {
  const rows: (InventoryRow | undefined)[] = [];
  const latest = resumed?.saves.filter((s) => s.kind === "full").at(-1);
  if (latest) {
    rows.push(
      await digestRow(
        dir,
        `latest full checkpoint (iter ${latest.iteration}) model`,
        join(latest.dir, "model.pt"),
        "committed by the manager",
      ),
    );
  }
  if (artifactDir) {
    const manifest = join(artifactDir, ".posttrain-checkpoint-artifact.json");
    rows.push(
      await digestRow(
        dir,
        done.has("prune") ? "artifact manifest (payload released)" : "artifact manifest",
        manifest,
        done.has("verify") ? "receipt verified against the archive" : "committed by the manager",
      ),
    );
    if (archivedModel && done.has("verify")) {
      rows.push(
        await digestRow(
          dir,
          "archived artifact model",
          archivedModel,
          "size and SHA-256 verified against the receipt",
        ),
      );
    }
    const { readdir } = await import("node:fs/promises");
    try {
      const staged = await readdir(paths.stage);
      for (const name of staged.filter((n) => n.startsWith("iter_"))) {
        rows.push(
          await digestRow(
            dir,
            "staged artifact model",
            join(paths.stage, name, "model.pt"),
            "digest checked on fetch",
          ),
        );
      }
    } catch {
      // no stage: the fetch step did not run
    }
  }
  for (const expert of experts)
    rows.push(
      await digestRow(
        dir,
        `expert model (${basename(join(expert, "..", "..", "..", ".."))})`,
        expert,
        "committed by the manager",
      ),
    );
  rows.push(await digestRow(dir, "merged model", paths.mergeOut, "verified by the merge"));
  try {
    const index = JSON.parse(await readFile(join(paths.hfOut, "model.safetensors.index.json"), "utf8")) as {
      weight_map: Record<string, string>;
    };
    for (const shard of [...new Set(Object.values(index.weight_map))].sort()) {
      rows.push(
        await digestRow(
          dir,
          "materialized HF shard",
          join(paths.hfOut, shard),
          "verified by the materializer",
        ),
      );
    }
  } catch {
    // not materialized
  }
  return rows.filter((r): r is InventoryRow => r !== undefined);
}
