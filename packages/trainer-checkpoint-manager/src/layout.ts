import { join } from "node:path";
import {
  CHECKPOINT_ARTIFACTS_DIR,
  CHECKPOINTS_DIR,
  type CheckpointFormat,
  defaultCheckpointPrefix,
  formatIterDir,
  formatRunTs,
  type LogicalComponent,
  type PhysicalComponentName,
  parseRunTs,
  runAttemptDir,
} from "@ckpt/manifest";
import { ManagerError } from "./errors.js";
import type { SavePlan } from "./plan.js";

/** Below the attempt directory: staged control files of a direct primary, and control files copied for a resume. */
export const STAGING_DIR = ".ckpt-staging";
export const RESUME_CACHE_DIR = ".ckpt-resume";

/** `run_ts`: `<name>/<RUN_TS>/checkpoints`; `legacy`: a job whose `<name>/checkpoints/` predates run attempts. */
export type LayoutKind = "run_ts" | "legacy";

/** The run attempt a manager works in. */
export interface AttemptDecision {
  readonly layout: LayoutKind;
  /** The attempt's RUN_TS ("" under the legacy flat layout). */
  readonly runTs: string;
  readonly attemptDir: string;
  /** `minted` a new attempt, `adopted` the newest existing one, `given` by config/caller, `legacy` flat layout. */
  readonly how: "minted" | "adopted" | "given" | "legacy";
}

/** What decides the attempt: names, settings and what exists on disk. */
export interface AttemptInputs {
  readonly outputRoot: string;
  readonly project: string;
  readonly group: string;
  readonly name: string;
  /** `run_ts` from the config ("" when unset). */
  readonly configRunTs: string;
  /** RUN_TS handed in by the caller (a broadcast from rank 0, a pinned Ray worker). */
  readonly givenRunTs?: string;
  readonly resume: string;
  readonly rank: number;
  /** The RUN_TS-named directories already under `<project>/<group>/<name>/`. */
  readonly existingRunTs: readonly string[];
  /** `<project>/<group>/<name>/checkpoints/` exists: the legacy flat layout. */
  readonly legacyFlat: boolean;
  readonly now: Date;
}

/**
 * Decides the run attempt (seed 001, "Layout"): a given RUN_TS is used as it is; a legacy flat
 * job keeps its layout; `resume=off` mints a new sibling attempt (later than every existing one,
 * so nothing is overwritten and `auto` adopts it next time); otherwise the newest existing
 * attempt is adopted (a resumed window reuses the RUN_TS of the first launch) and the first
 * launch mints one. Only rank 0 may mint. Pure.
 */
export function decideAttempt(inputs: AttemptInputs): AttemptDecision {
  const run = { project: inputs.project, group: inputs.group, name: inputs.name };
  const given = inputs.givenRunTs ?? "";
  if (given !== "" && inputs.configRunTs !== "" && given !== inputs.configRunTs) {
    throw new ManagerError(
      "MANAGER_BAD_ARGUMENT",
      `open checkpoint manager: run_ts ${inputs.configRunTs} in the config and ${given} from the caller differ. Pass one of them.`,
      { kind: "input", knob: "run_ts" },
    );
  }
  const pinned = given !== "" ? given : inputs.configRunTs;
  if (pinned !== "") {
    if (parseRunTs(pinned) === undefined) {
      throw new ManagerError(
        "MANAGER_BAD_ARGUMENT",
        `open checkpoint manager: run_ts ${JSON.stringify(pinned)} is not a YYYYmmddHHMMSS timestamp.`,
        { kind: "input", knob: "run_ts" },
      );
    }
    return {
      layout: "run_ts",
      runTs: pinned,
      attemptDir: runAttemptDir(inputs.outputRoot, { ...run, runTs: pinned }),
      how: "given",
    };
  }
  if (inputs.legacyFlat) {
    return {
      layout: "legacy",
      runTs: "",
      attemptDir: join(inputs.outputRoot, inputs.project, inputs.group, inputs.name),
      how: "legacy",
    };
  }
  const existing = inputs.existingRunTs.filter((ts) => parseRunTs(ts) !== undefined).sort();
  const newest = existing.at(-1);
  if (inputs.resume !== "off" && newest !== undefined) {
    return {
      layout: "run_ts",
      runTs: newest,
      attemptDir: runAttemptDir(inputs.outputRoot, { ...run, runTs: newest }),
      how: "adopted",
    };
  }
  if (inputs.rank !== 0) {
    throw new ManagerError(
      "MANAGER_RUN_TS_REQUIRED",
      `open checkpoint manager on rank ${inputs.rank}: no run attempt exists yet and only rank 0 mints one. ` +
        "Resolve it on rank 0 (manager.runTs), broadcast it, and pass it as runTs (or run_ts) on every other rank.",
      { kind: "input", knob: "run_ts" },
    );
  }
  let time = inputs.now.getTime();
  const floor = newest === undefined ? undefined : parseRunTs(newest)!.getTime() + 1000;
  if (floor !== undefined && time < floor) time = floor;
  const runTs = formatRunTs(new Date(Math.floor(time / 1000) * 1000));
  return {
    layout: "run_ts",
    runTs,
    attemptDir: runAttemptDir(inputs.outputRoot, { ...run, runTs }),
    how: "minted",
  };
}

/**
 * `resume=off` under the legacy flat layout (seed 001 "Resume": the one case where a fresh run
 * does not get a sibling attempt): the fresh run would save into the same `checkpoints/` that
 * already holds this job's history, and every save at or behind it would have to overwrite a
 * committed checkpoint. Refused before training starts when that history exists, naming the knob
 * and the ways out; an empty flat layout starts fresh. Pure.
 */
export function refuseLegacyFresh(
  attempt: Pick<AttemptDecision, "layout" | "attemptDir">,
  resume: string,
  existing: { readonly latest: number | undefined; readonly iterDirs: readonly string[] },
): void {
  if (attempt.layout !== "legacy" || resume !== "off") return;
  if (existing.latest === undefined && existing.iterDirs.length === 0) return;
  const root = join(attempt.attemptDir, CHECKPOINTS_DIR);
  const what =
    existing.latest === undefined
      ? `${existing.iterDirs.length} iteration director${existing.iterDirs.length === 1 ? "y" : "ies"}`
      : `checkpoints up to iteration ${existing.latest} (latest_checkpoint.txt)`;
  throw new ManagerError(
    "MANAGER_LEGACY_FRESH_REFUSED",
    `open checkpoint manager: resume=off on the legacy flat layout ${root}, which holds ${what}. ` +
      "A legacy job has no run attempts, so a fresh run would save over that history; committed checkpoints are never overwritten. " +
      "Choose one: resume=auto to continue from the latest checkpoint; or set run_ts (a YYYYmmddHHMMSS timestamp) to start a fresh " +
      `attempt in <name>/<RUN_TS>/ beside the flat layout; or move ${root} aside yourself.`,
    { kind: "refused", subject: root, knob: "resume" },
  );
}

/** The default checkpoint prefix of a store (`<project>/<group>/<name>/<RUN_TS>/checkpoints`, legacy without RUN_TS). Pure. */
export function defaultPrefixFor(
  attempt: Pick<AttemptDecision, "layout" | "runTs">,
  run: { project: string; group: string; name: string },
): string {
  if (attempt.layout === "legacy") return `${run.project}/${run.group}/${run.name}/${CHECKPOINTS_DIR}`;
  return defaultCheckpointPrefix({ ...run, runTs: attempt.runTs });
}

/** Target paths of the physical components a trainer writes. Directory targets end in `/`. */
export type ComponentTargets = Partial<Record<PhysicalComponentName, string>>;

/** Where one save goes: its iteration directory (or URI) and the component targets. */
export interface SaveTargets {
  /** The iteration directory (a URI for a direct object-store primary). */
  readonly dir: string;
  /** Component targets of a single-role save (empty for a multi-role boundary). */
  readonly targets: ComponentTargets;
  /** Per-role targets of a multi-role boundary (`<dir>/<role>/...`). */
  readonly roles?: Readonly<Record<string, ComponentTargets>>;
}

export interface TargetOptions {
  /** Role names of a multi-role boundary. */
  readonly roles?: readonly string[];
  /**
   * Direct object-store primary: the checkpoint root URI (`…/checkpoints`) where DCP components
   * are written in place, and the local directory where the trainer writes `trainer.pt` /
   * `data.pt` for the manager to upload as a control generation.
   */
  readonly remote?: { readonly checkpointsUri: string; readonly stagingDir: string };
}

const PHYSICAL_OF: Record<LogicalComponent, readonly PhysicalComponentName[]> = {
  model: ["model"],
  optimizer: ["optim"],
  training_state: ["trainer", "data", "old", "ref"],
};
/** Components that are single files whatever the format. */
const ALWAYS_FILE: ReadonlySet<PhysicalComponentName> = new Set(["trainer", "data"]);

function componentTargets(
  base: string,
  components: readonly LogicalComponent[],
  format: CheckpointFormat,
  smallBase: string = base,
): ComponentTargets {
  const targets: ComponentTargets = {};
  for (const logical of components) {
    for (const name of PHYSICAL_OF[logical]) {
      if (ALWAYS_FILE.has(name)) targets[name] = `${smallBase}/${name}.pt`;
      else targets[name] = format === "dcp" ? `${base}/${name}/` : `${base}/${name}.pt`;
    }
  }
  return targets;
}

/** The sibling of a `…/checkpoints` URI or path: `…/checkpoint_artifacts`. */
function artifactsSibling(checkpointsRoot: string): string {
  const cut = checkpointsRoot.lastIndexOf("/");
  return `${checkpointsRoot.slice(0, cut + 1)}${CHECKPOINT_ARTIFACTS_DIR}`;
}

/**
 * The target of every physical component of a save: `model.pt` | `model/`, `optim.pt` | `optim/`,
 * `trainer.pt`, `data.pt`, `old.pt` | `old/`, `ref.pt` | `ref/`, for the plan's logical components
 * (`data`, `old` and `ref` are written only by trainers that have them). Every rank computes the
 * same paths without talking to rank 0. A consolidated trainer whose optimizer is sharded may
 * write `optim/` instead of `optim.pt`. Pure.
 */
export function targetsFor(
  attemptDir: string,
  step: number,
  plan: Pick<SavePlan, "kind" | "components">,
  format: CheckpointFormat,
  options: TargetOptions = {},
): SaveTargets {
  const iterName = formatIterDir(step);
  if (options.remote !== undefined) {
    const root = options.remote.checkpointsUri.replace(/\/+$/, "");
    const dir = `${plan.kind === "full" ? root : artifactsSibling(root)}/${iterName}`;
    const staging = join(
      options.remote.stagingDir,
      plan.kind === "full" ? CHECKPOINTS_DIR : CHECKPOINT_ARTIFACTS_DIR,
      iterName,
    );
    return { dir, targets: componentTargets(dir, plan.components, format, staging) };
  }
  const dir = join(attemptDir, plan.kind === "full" ? CHECKPOINTS_DIR : CHECKPOINT_ARTIFACTS_DIR, iterName);
  const roles = options.roles ?? [];
  if (roles.length > 0) {
    const byRole: Record<string, ComponentTargets> = {};
    for (const role of roles) byRole[role] = componentTargets(join(dir, role), plan.components, format);
    return { dir, targets: {}, roles: byRole };
  }
  return { dir, targets: componentTargets(dir, plan.components, format) };
}
