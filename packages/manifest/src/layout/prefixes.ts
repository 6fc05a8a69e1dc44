import { truncateForMessage } from "@ckpt/errors";
import { basename, dirname, join } from "node:path";
import { ManifestError } from "../errors.js";
import { pathProblem } from "../paths/safe.js";
import { formatIterDir, parseIterDir } from "./iter.js";
import { assertRunTs, type RunTs } from "./run-ts.js";

/** Root of resumable full checkpoints inside a run attempt. */
export const CHECKPOINTS_DIR = "checkpoints";
/** Sibling root of partial (non-resumable) artifacts; never counted by full-checkpoint retention. */
export const CHECKPOINT_ARTIFACTS_DIR = "checkpoint_artifacts";

export type CheckpointRootKind = typeof CHECKPOINTS_DIR | typeof CHECKPOINT_ARTIFACTS_DIR;

/** The names that place a run attempt: `<project>/<group>/<name>/<run_ts>`. */
export interface RunAttempt {
  project: string;
  group: string;
  name: string;
  runTs: RunTs;
}

function requireSegment(value: string, what: string): void {
  const problem = typeof value === "string" ? pathProblem(value) : { code: "", reason: "it is not a string" };
  if (problem !== undefined || value.includes("/")) {
    throw new ManifestError(
      "LAYOUT_BAD_SEGMENT",
      `build run path: ${what} ${truncateForMessage(String(value))} is not one path segment` +
        `${problem ? ` (${problem.reason})` : ""}. Use a plain name without '/'.`,
      { kind: "input", field: what },
    );
  }
}

/** `<project>/<group>/<name>/<run_ts>`, validated segment by segment. Pure. */
function runAttemptPrefix(run: RunAttempt): string {
  requireSegment(run.project, "project");
  requireSegment(run.group, "group");
  requireSegment(run.name, "name");
  assertRunTs(run.runTs, "the run attempt");
  return `${run.project}/${run.group}/${run.name}/${run.runTs}`;
}

/** The run-relative default upload/store prefix `<project>/<group>/<name>/<run_ts>/checkpoints`. */
export function defaultCheckpointPrefix(run: RunAttempt): string {
  return `${runAttemptPrefix(run)}/${CHECKPOINTS_DIR}`;
}

/** The local run-attempt directory below an output root. */
export function runAttemptDir(outputRoot: string, run: RunAttempt): string {
  return join(outputRoot, ...runAttemptPrefix(run).split("/"));
}

/** `<attempt>/checkpoints` or `<attempt>/checkpoint_artifacts`. */
export function checkpointRootDir(attemptDir: string, kind: CheckpointRootKind): string {
  return join(attemptDir, kind);
}

function normalizeUploadPrefix(uploadPrefix: string): string {
  const prefix = uploadPrefix.endsWith("/") ? uploadPrefix.slice(0, -1) : uploadPrefix;
  const problem = pathProblem(prefix);
  if (problem !== undefined) {
    throw new ManifestError(
      problem.code,
      `derive archive prefix from ${truncateForMessage(uploadPrefix)}: ${problem.reason}. ` +
        "An upload prefix is a relative key prefix like project/group/name/20260901120000/checkpoints.",
      { kind: "input", field: "upload_prefix" },
    );
  }
  if (basename(prefix) !== CHECKPOINTS_DIR) {
    throw new ManifestError(
      "LAYOUT_NOT_CHECKPOINTS_PREFIX",
      `derive archive prefix from ${truncateForMessage(uploadPrefix)}: it does not end in /${CHECKPOINTS_DIR}. ` +
        "Pass the run's checkpoint prefix (<project>/<group>/<name>/<run_ts>/checkpoints); artifacts go to its sibling.",
      { kind: "input", field: "upload_prefix" },
    );
  }
  return prefix;
}

/** The prefix of a full checkpoint: `<upload prefix>/iter_<n>`. */
export function checkpointPrefixFor(uploadPrefix: string, iteration: number): string {
  return `${normalizeUploadPrefix(uploadPrefix)}/${formatIterDir(iteration)}`;
}

/** The sibling artifacts root of an upload prefix: `.../checkpoints` → `.../checkpoint_artifacts`. */
export function artifactsPrefixFor(uploadPrefix: string): string {
  const prefix = normalizeUploadPrefix(uploadPrefix);
  const parent = prefix.includes("/") ? prefix.slice(0, prefix.lastIndexOf("/") + 1) : "";
  return `${parent}${CHECKPOINT_ARTIFACTS_DIR}`;
}

/** Where an artifact is archived: `.../checkpoints` → `.../checkpoint_artifacts/iter_<n>`. */
export function artifactPrefixFor(uploadPrefix: string, iteration: number): string {
  return `${artifactsPrefixFor(uploadPrefix)}/${formatIterDir(iteration)}`;
}

/** What a local `<attempt>/<root>/iter_<n>` path is, or undefined when it is not one. Pure. */
export interface IterPathInfo {
  root: CheckpointRootKind;
  iteration: number;
  iterDirName: string;
  /** The run-attempt directory holding the root. */
  attemptDir: string;
}

export function classifyIterPath(path: string): IterPathInfo | undefined {
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  const iterDirName = basename(trimmed);
  const iteration = parseIterDir(iterDirName);
  if (iteration === undefined) return undefined;
  const rootDir = dirname(trimmed);
  const root = basename(rootDir);
  if (root !== CHECKPOINTS_DIR && root !== CHECKPOINT_ARTIFACTS_DIR) return undefined;
  return { root, iteration, iterDirName, attemptDir: dirname(rootDir) };
}
