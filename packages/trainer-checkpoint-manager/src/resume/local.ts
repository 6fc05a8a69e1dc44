import { readdir } from "node:fs/promises";
import { join, sep } from "node:path";
import {
  ARTIFACT_MANIFEST,
  CONTROL_MANIFEST,
  LATEST_POINTER,
  MULTI_ROLE_SUCCESS,
  CHECKPOINT_ARTIFACTS_DIR,
  CHECKPOINTS_DIR,
  type CheckpointFormat,
  hashFile,
  ManifestError,
  openFileByteSource,
  PHYSICAL_COMPONENTS,
  type PhysicalComponentName,
  parseIterDir,
  physicalComponentPath,
  readBoundedFile,
  sha256Hex,
} from "@ckpt/manifest";
import { type CheckpointEntry, listEntries } from "@ckpt/retention";
import { openTorchFile, PickleDict, TorchTensor } from "@ckpt/tensors";
import { verifyCheckpointDir } from "@ckpt/verify";
import { messageOf } from "../errors.js";
import { entryKind } from "../internal/fs.js";
import type { ComponentTargets } from "../layout.js";
import {
  CHECKPOINT_DESCRIPTION_FILE,
  checkpointDescription,
  VALIDATION_STATE_FILE,
  validationRecord,
} from "../records.js";
import type { ValidationState } from "../types.js";
import type { ChangedFiles, PointerState, ProbedCheckpoint } from "./decide.js";

export interface ProbeOptions {
  /** Read a legacy trainer state when no iter_* segment or manifest names the iteration. */
  readonly needIteration: boolean;
  /** Hash a legacy single file (its own manifest) for a pinned resume; other manifests are always hashed (they are small). */
  readonly hashLegacyFile: boolean;
}

/** A verifier's problem codes that mean "present but not what it claims to be" rather than "missing or different". */
const UNREADABLE_CODES: ReadonlySet<string> = new Set([
  "FILE_UNREADABLE",
  "FILE_CRC_MISMATCH",
  "DCP_METADATA_UNREADABLE",
]);

/** Problem codes that mean "present, complete, but not the bytes or tensors the records name". */
const CHANGED_CODES: ReadonlySet<string> = new Set(["VERIFY_DIGEST_MISMATCH", "VERIFY_TENSORS_MISMATCH"]);

/**
 * Judges a checkpoint directory with @ckpt/verify exactly as `ckpt verify` does (records against
 * files with every recorded SHA-256 and tensor list, `.pt` structure, DCP completeness from
 * `.metadata`): each problem as `<code> <path>: <message>`, in verify's order. They are
 * `unreadable` when every one is (files present but not what they claim to be), `changed` when
 * there is an identity mismatch and nothing else but unreadable files (with the first changed
 * file, absolute), else `problems`. One
 * judge, so resume and verify cannot disagree.
 */
async function verifiedProblems(
  dir: string,
): Promise<{ problems: string[]; unreadable: string[]; changed?: ChangedFiles }> {
  // verify leaves the validation record out (its receipt size is stale by design); readValidation judges it.
  const report = await verifyCheckpointDir(dir);
  const found = report.problems;
  // Retention state for verify, a refusal for resume: an exact resume needs the optimizer it released.
  const released = (report.retention?.optimizerReleased ?? []).map(
    (path) =>
      `${path}: retention released the optimizer state (keep_optim_last); weights and trainer state are here, an exact resume needs the optimizer`,
  );
  const lines = [...found.map((p) => `${p.code} ${p.path}: ${p.message}`), ...released];
  if (released.length > 0) return { problems: lines, unreadable: [] };
  if (found.length > 0 && found.every((p) => UNREADABLE_CODES.has(p.code)))
    return { problems: [], unreadable: lines };
  // A changed file may also fail to open (a torn zip): it is still the recorded file, changed.
  const changed = found.find((p) => CHANGED_CODES.has(p.code));
  if (changed !== undefined && found.every((p) => CHANGED_CODES.has(p.code) || UNREADABLE_CODES.has(p.code)))
    return { problems: [], unreadable: [], changed: { file: join(dir, changed.path), problems: lines } };
  return { problems: lines, unreadable: [] };
}

/** The iteration the last `iter_*` segment of a path names. Pure. */
export function iterationFromPath(path: string): number | undefined {
  const segments = path.split(sep).filter((s) => s !== "");
  for (let i = segments.length - 1; i >= 0; i--) {
    const iteration = parseIterDir(segments[i]!);
    if (iteration !== undefined) return iteration;
  }
  return undefined;
}

/**
 * Opens a torch.save zip with the restricted unpickler (nothing is executed) and hands its root
 * object to `use`; a file that is not one yields a problem naming it.
 */
async function withTorchRoot<T>(
  path: string,
  use: (root: unknown) => T,
): Promise<{ value?: T; problem?: string }> {
  let source: Awaited<ReturnType<typeof openFileByteSource>> | undefined;
  try {
    source = await openFileByteSource(path);
    const file = await openTorchFile(source);
    return { value: use(file.root) };
  } catch (error) {
    return { problem: `${path} is not a readable torch.save file (${messageOf(error)})` };
  } finally {
    await source?.close();
  }
}

/**
 * The tensor count of a bare state_dict (a top-level dict of tensors only): weights without the
 * optimizer and trainer state a resume needs, as a weights-only `model.pt` is. Pure.
 */
function weightsOnlyTensorCount(root: unknown): number | undefined {
  if (!(root instanceof PickleDict) || root.map.size === 0) return undefined;
  return [...root.map.values()].every((v) => v instanceof TorchTensor) ? root.map.size : undefined;
}

/** Reads `optimizer_step` / `iter` from the top level of a torch.save dict; they must agree when both exist. */
async function readTrainerIteration(path: string): Promise<{ iteration?: number; problem?: string }> {
  const read = await withTorchRoot(path, (root): { iteration?: number; problem?: string } => {
    if (!(root instanceof PickleDict)) return { problem: `${path} does not hold a dict at its top level` };
    const field = (key: string): number | undefined => {
      const value = root.map.get(key);
      if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
      if (typeof value === "bigint" && value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER))
        return Number(value);
      return undefined;
    };
    const step = field("optimizer_step");
    const iter = field("iter");
    if (step !== undefined && iter !== undefined && step !== iter) {
      return { problem: `${path} holds optimizer_step ${step} and iter ${iter}, which disagree` };
    }
    const value = step ?? iter;
    return value === undefined ? {} : { iteration: value };
  });
  return read.value ?? { problem: read.problem! };
}

/** Whether a path lies in an attempt's `checkpoint_artifacts/iter_*` tree. Pure. */
function isArtifactPath(path: string): boolean {
  const segments = path.split(sep).filter((s) => s !== "");
  return segments.some(
    (s, i) =>
      s === CHECKPOINT_ARTIFACTS_DIR &&
      i + 1 < segments.length &&
      parseIterDir(segments[i + 1]!) !== undefined,
  );
}

async function readValidation(dir: string): Promise<{ state?: ValidationState; problem?: string }> {
  const path = join(dir, VALIDATION_STATE_FILE);
  if ((await entryKind(path)) === "absent") return {};
  try {
    return { state: (await validationRecord.read(path)).state };
  } catch (error) {
    return { problem: messageOf(error) };
  }
}

function targetOf(dir: string, name: PhysicalComponentName, kind: "file" | "dir"): string {
  const path = join(dir, physicalComponentPath(name, kind));
  return kind === "dir" ? `${path}/` : path;
}

/** Reads the description `.posttrain-checkpoint.json` of a checkpoint directory (`verify` judges the files against it). */
async function probeDescribed(
  dir: string,
): Promise<
  { components: ComponentTargets; format: CheckpointFormat; sha: string; iteration: number } | undefined
> {
  const path = join(dir, CHECKPOINT_DESCRIPTION_FILE);
  let bytes: Uint8Array;
  let description: ReturnType<typeof checkpointDescription.parse>;
  try {
    bytes = await readBoundedFile(path);
    description = checkpointDescription.parse(bytes, path);
  } catch {
    return undefined; // verify reports it (VERIFY_RECORD_INVALID)
  }
  const components: ComponentTargets = {};
  for (const c of description.physical_components) {
    components[c.name] = targetOf(dir, c.name, c.kind);
  }
  return { components, format: description.format, sha: sha256Hex(bytes), iteration: description.iteration };
}

/**
 * The physical components a checkpoint directory's listing shows (`<name>.pt` files, `<name>/`
 * directories) and the format they imply: a model directory is DCP; undefined with no component.
 * Pure.
 */
export function componentsListed(
  dir: string,
  entries: readonly CheckpointEntry[],
): { components: ComponentTargets; format: CheckpointFormat | undefined } {
  const kinds = new Map(entries.map((e) => [e.name, e.kind]));
  const components: ComponentTargets = {};
  for (const name of PHYSICAL_COMPONENTS) {
    if (kinds.get(physicalComponentPath(name, "file")) === "file")
      components[name] = targetOf(dir, name, "file");
    else if (kinds.get(physicalComponentPath(name, "dir")) === "dir")
      components[name] = targetOf(dir, name, "dir");
  }
  const format =
    components.model?.endsWith("/") === true
      ? "dcp"
      : Object.keys(components).length > 0
        ? "consolidated"
        : undefined;
  return { components, format };
}

/**
 * Probes a directory without a description (written before descriptions existed): what is there is
 * the checkpoint. Verify judges what is there; resume also needs the optimizer state.
 */
async function probeUndescribed(
  dir: string,
  problems: string[],
): Promise<{ components: ComponentTargets; format: CheckpointFormat }> {
  const { components, format } = componentsListed(dir, await listEntries(dir));
  if (components.optim === undefined) {
    problems.push(
      "its optimizer state (optim.pt or optim/) is missing (pruned by retention?); such a directory serves evaluation or init_from, not resume",
    );
  }
  return { components, format: format ?? "consolidated" };
}

/** Probes a copied direct-primary checkpoint: its control manifest and the control files it names. */
async function probeControl(
  dir: string,
  problems: string[],
): Promise<{ components: ComponentTargets; sha: string; iteration: number } | undefined> {
  const path = join(dir, CONTROL_MANIFEST.fileName);
  try {
    const bytes = await readBoundedFile(path);
    const manifest = CONTROL_MANIFEST.parse(bytes, path);
    const components: ComponentTargets = {};
    for (const c of manifest.components) components[c] = `${join(dir, c)}/`;
    for (const role of ["trainer", "data"] as const) {
      const entry = manifest.control[role];
      if (entry === null) continue;
      const digest = await hashFile(join(dir, entry.path)).catch(() => undefined);
      if (digest === undefined) problems.push(`${entry.path} is missing`);
      else if (digest.sha256 !== entry.sha256 || digest.size !== entry.size)
        problems.push(`${entry.path} does not match its descriptor`);
      components[role] = join(dir, entry.path);
    }
    return { components, sha: sha256Hex(bytes), iteration: manifest.iteration };
  } catch (error) {
    problems.push(messageOf(error));
    return undefined;
  }
}

/**
 * Probes a local resume location: a checkpoint directory (described, multi-role with `_SUCCESS`,
 * a copied direct-primary checkpoint, or an older undescribed one), judged first by @ckpt/verify,
 * or a legacy single `.pt` file.
 */
export async function probeLocalCheckpoint(
  path: string,
  options: ProbeOptions,
): Promise<ProbedCheckpoint | { missing: true; path: string }> {
  const kind = await entryKind(path);
  if (kind === "absent" || kind === "other") return { missing: true, path };
  const problems: string[] = [];
  const dirPath = path.endsWith("/") ? path.slice(0, -1) : path;
  if (
    isArtifactPath(dirPath) ||
    (kind === "dir" && (await entryKind(join(dirPath, ARTIFACT_MANIFEST.fileName))) !== "absent")
  ) {
    return {
      iterDir: dirPath,
      iteration: iterationFromPath(dirPath),
      format: "consolidated",
      components: {},
      artifact: true,
      problems,
    };
  }
  if (kind === "file") {
    let iteration = iterationFromPath(path);
    const { value: weightsOnly, problem } = await withTorchRoot(path, weightsOnlyTensorCount);
    const unreadable = problem === undefined ? [] : [problem];
    if (weightsOnly !== undefined) {
      problems.push(
        `${path} holds only weights (a state_dict of ${weightsOnly} tensors, no optimizer or trainer state): ` +
          "a weights file, not a training checkpoint. Use it as init_from, or resume from a full checkpoint",
      );
    }
    if (iteration === undefined && options.needIteration && unreadable.length === 0) {
      iteration = (await readTrainerIteration(path)).iteration;
    }
    const sha = options.hashLegacyFile ? (await hashFile(path)).sha256 : undefined;
    return {
      iterDir: path,
      iteration,
      format: "legacy_file",
      components: {},
      legacyFile: path,
      ...(sha === undefined ? {} : { manifestSha256: sha }),
      problems,
      unreadable,
    };
  }
  const dir = dirPath;
  let iteration = iterationFromPath(dir);
  const verified = await verifiedProblems(dir);
  problems.push(...verified.problems);
  const validation = await readValidation(dir);
  if (validation.problem !== undefined) problems.push(validation.problem);
  const base = {
    iterDir: dir,
    ...(validation.state === undefined ? {} : { validation: validation.state }),
    ...(verified.unreadable.length === 0 ? {} : { unreadable: verified.unreadable }),
    ...(verified.changed === undefined ? {} : { changed: verified.changed }),
  };

  if ((await entryKind(join(dir, MULTI_ROLE_SUCCESS.fileName))) === "file") {
    const markerPath = join(dir, MULTI_ROLE_SUCCESS.fileName);
    try {
      const bytes = await readBoundedFile(markerPath);
      const marker = MULTI_ROLE_SUCCESS.parse(bytes, markerPath);
      const roles: Record<string, { components: ComponentTargets; optimizerStep: number }> = {};
      let format: CheckpointFormat = "consolidated";
      for (const [role, commit] of Object.entries(marker.roles)) {
        const roleDir = join(dir, role);
        const roleProblems: string[] = [];
        const found: { components: ComponentTargets; format: CheckpointFormat } =
          (await entryKind(join(roleDir, CHECKPOINT_DESCRIPTION_FILE))) === "absent"
            ? await probeUndescribed(roleDir, roleProblems)
            : ((await probeDescribed(roleDir)) ?? { components: {}, format });
        problems.push(...roleProblems.map((p) => `${role}: ${p}`));
        format = found.format;
        roles[role] = { components: found.components, optimizerStep: commit.optimizer_step };
      }
      return {
        ...base,
        iteration: iteration ?? marker.iteration,
        format,
        components: {},
        roles,
        ...(marker.loop_state === undefined ? {} : { loopState: marker.loop_state }),
        manifestSha256: sha256Hex(bytes),
        problems,
      };
    } catch (error) {
      problems.push(messageOf(error));
      return { ...base, iteration, format: "consolidated", components: {}, problems };
    }
  }
  if ((await entryKind(join(dir, CONTROL_MANIFEST.fileName))) === "file") {
    const control = await probeControl(dir, problems);
    return {
      ...base,
      iteration: iteration ?? control?.iteration,
      format: "dcp",
      components: control?.components ?? {},
      ...(control === undefined ? {} : { manifestSha256: control.sha }),
      problems,
    };
  }
  if ((await entryKind(join(dir, CHECKPOINT_DESCRIPTION_FILE))) !== "absent") {
    const described = await probeDescribed(dir);
    return {
      ...base,
      iteration: iteration ?? described?.iteration,
      format: described?.format ?? "consolidated",
      components: described?.components ?? {},
      ...(described === undefined ? {} : { manifestSha256: described.sha }),
      problems,
    };
  }
  const found = await probeUndescribed(dir, problems);
  if (
    iteration === undefined &&
    options.needIteration &&
    found.components.trainer !== undefined &&
    verified.unreadable.length === 0
  ) {
    const read = await readTrainerIteration(found.components.trainer);
    iteration = read.iteration;
    if (read.problem !== undefined) problems.push(read.problem);
  }
  return { ...base, iteration, format: found.format, components: found.components, problems };
}

/** Reads the attempt's latest pointer and probes the checkpoint it names (judged as `ckpt verify` judges it). */
export async function readLocalPointer(checkpointsRoot: string): Promise<PointerState> {
  const path = join(checkpointsRoot, LATEST_POINTER.fileName);
  let pointer: Awaited<ReturnType<typeof LATEST_POINTER.read>>;
  try {
    pointer = await LATEST_POINTER.read(path);
  } catch (error) {
    if (error instanceof ManifestError && error.code === "RECORD_NOT_FOUND") return { state: "absent" };
    return { state: "invalid", path, message: messageOf(error) };
  }
  const probed = await probeLocalCheckpoint(join(checkpointsRoot, pointer.iterDirName), {
    needIteration: false,
    hashLegacyFile: false,
  });
  const checkpoint: ProbedCheckpoint =
    "missing" in probed
      ? {
          iterDir: probed.path,
          iteration: pointer.iteration,
          format: "consolidated",
          components: {},
          problems: ["the directory does not exist"],
        }
      : { ...probed, iteration: pointer.iteration };
  return { state: "present", path, iteration: pointer.iteration, checkpoint };
}

/** The committed artifacts of an attempt (`checkpoint_artifacts/iter_*` holding the native manifest), by iteration. */
export async function listCommittedArtifacts(
  attemptDir: string,
): Promise<Array<{ iteration: number; dir: string }>> {
  const root = join(attemptDir, CHECKPOINT_ARTIFACTS_DIR);
  let names: string[];
  try {
    names = await readdir(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  const out: Array<{ iteration: number; dir: string }> = [];
  for (const name of names) {
    const iteration = parseIterDir(name);
    if (iteration === undefined) continue;
    if ((await entryKind(join(root, name, ARTIFACT_MANIFEST.fileName))) === "file")
      out.push({ iteration, dir: join(root, name) });
  }
  return out.sort((a, b) => a.iteration - b.iteration);
}

/** `<attempt>/checkpoints`. */
export function localCheckpointsRoot(attemptDir: string): string {
  return join(attemptDir, CHECKPOINTS_DIR);
}
