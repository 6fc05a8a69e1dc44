import { CHECKPOINT_ARTIFACTS_DIR } from "@ckpt/manifest";
import { ManagerError } from "../errors.js";
import type { CheckpointLocation, ResumeCheckpoint, ResumeDecision, ValidationState } from "../types.js";

/** Files present and complete whose bytes or tensors are not the ones the checkpoint's records name. */
export interface ChangedFiles {
  /** The first such file, absolute. */
  readonly file: string;
  /** Each as `<code> <path>: <message>`. */
  readonly problems: readonly string[];
}

/** What a probe found at a checkpoint location. `problems` empty means complete. */
export interface ProbedCheckpoint extends CheckpointLocation {
  readonly validation?: ValidationState;
  /** Why it cannot be resumed (missing components, size mismatches, an unreadable manifest). */
  readonly problems: readonly string[];
  /** Component files present but not what they claim to be (not a readable torch.save zip, a DCP directory without `.metadata`). */
  readonly unreadable?: readonly string[];
  /** Recorded SHA-256s or tensor lists that the files no longer match: not the checkpoint that was saved. */
  readonly changed?: ChangedFiles;
  /** It is a `checkpoint_artifacts/iter_*` artifact (a partial plan): never a resume source. */
  readonly artifact?: boolean;
}

/** Everything a probe found wrong, as `<code> <path>: <message>` lines where verify gave them. Pure. */
export function probeFindings(c: ProbedCheckpoint): string[] {
  return [...c.problems, ...(c.unreadable ?? []), ...(c.changed?.problems ?? [])];
}

/** The latest pointer of the attempt's checkpoints root. */
export type PointerState =
  | { readonly state: "absent" }
  | { readonly state: "invalid"; readonly path: string; readonly message: string }
  | {
      readonly state: "present";
      readonly path: string;
      readonly iteration: number;
      readonly checkpoint: ProbedCheckpoint;
    };

export interface ResumeInputs {
  /** The `resume` setting: `auto`, `off`, or an explicit path / URI. */
  readonly resume: string;
  readonly attemptDir: string;
  readonly pin: string | null;
  /** Consulted under `auto`. */
  readonly pointer: PointerState;
  /** Probed under an explicit setting; `missing` when nothing exists there. */
  readonly explicit?: ProbedCheckpoint | { readonly missing: true; readonly path: string };
  /** The newest committed artifact of the adopted attempt (`checkpoint_artifacts/iter_*` with its manifest). */
  readonly newestArtifact?: { readonly iteration: number; readonly dir: string };
}

function remedies(attemptDir: string): string {
  return (
    "Choose one: continue from the artifact as a NEW run (a new job name, init_from set to the committed model artifact, " +
    "the source cursor advanced by the examples consumed, fresh optimizer state); or set resume=off to mint a fresh attempt " +
    `beside ${attemptDir}; or save the full component plan when exact resume across requeues is required.`
  );
}

function refuseCold(attemptDir: string, artifact: { iteration: number; dir: string }): ManagerError {
  return new ManagerError(
    "MANAGER_COLD_RESTART_OVER_ARTIFACT",
    `resume in ${attemptDir}: the attempt holds the committed artifact ${artifact.dir} (iteration ${artifact.iteration}) but no resumable ` +
      `checkpoint, and a step-0 restart would collide with that iteration at its first save. ${remedies(attemptDir)}`,
    { kind: "refused", subject: attemptDir, knob: "resume" },
  );
}

function refuseBehind(
  attemptDir: string,
  iteration: number,
  where: string,
  artifact: { iteration: number; dir: string },
): ManagerError {
  return new ManagerError(
    "MANAGER_RESUME_BEHIND_ARTIFACT",
    `resume in ${attemptDir}: the checkpoint ${where} (iteration ${iteration}) is behind the committed artifact ${artifact.dir} ` +
      `(iteration ${artifact.iteration}); resuming would replay up to it and collide one save later. ${remedies(attemptDir)}`,
    { kind: "refused", subject: attemptDir, knob: "resume" },
  );
}

function adopt(source: "auto" | "explicit", c: ProbedCheckpoint, reason: string): ResumeCheckpoint {
  return {
    kind: "checkpoint",
    source,
    iterDir: c.iterDir,
    iteration: c.iteration,
    format: c.format,
    components: c.components,
    ...(c.legacyFile === undefined ? {} : { legacyFile: c.legacyFile }),
    ...(c.roles === undefined ? {} : { roles: c.roles }),
    ...(c.loopState === undefined ? {} : { loopState: c.loopState }),
    ...(c.manifestSha256 === undefined ? {} : { manifestSha256: c.manifestSha256 }),
    ...(c.validation === undefined || c.validation === "published" ? {} : { validation: c.validation }),
    reason,
  };
}

function requireComplete(c: ProbedCheckpoint, how: string): void {
  if (c.artifact === true) {
    throw new ManagerError(
      "MANAGER_RESUME_ARTIFACT_SOURCE",
      `resume from ${c.iterDir} (${how}): it is a ${CHECKPOINT_ARTIFACTS_DIR}/ artifact, the output of a partial component plan, and never a resume source; ` +
        "resume reads full checkpoints only. Resume from a checkpoints/iter_* directory, or start a new run with the artifact as init_from (a warm start with fresh optimizer state).",
      { kind: "refused", subject: c.iterDir, knob: "resume" },
    );
  }
  if (c.problems.length > 0) {
    throw new ManagerError(
      "MANAGER_RESUME_INCOMPLETE",
      `resume from ${c.iterDir} (${how}): it is not a complete checkpoint: ${c.problems.join("; ")}. ` +
        "Resume from another checkpoint, or restore the missing files; training never silently restarts from scratch.",
      { kind: "refused", subject: c.iterDir, knob: "resume" },
    );
  }
  if (c.changed !== undefined) {
    throw new ManagerError(
      "MANAGER_RESUME_IDENTITY_MISMATCH",
      `resume from ${c.iterDir} (${how}): ${c.changed.file} is not the file the checkpoint recorded: ${c.changed.problems.join("; ")}. ` +
        "Nothing was loaded. Restore the file from a verified copy (an archive: `ckpt artifact fetch`), or resume from another checkpoint.",
      { kind: "refused", subject: c.changed.file, knob: "resume" },
    );
  }
  if (c.unreadable !== undefined && c.unreadable.length > 0) {
    throw new ManagerError(
      "MANAGER_RESUME_UNREADABLE",
      `resume from ${c.iterDir} (${how}): it is not a readable checkpoint: ${c.unreadable.join("; ")}. ` +
        "Nothing was loaded. Point resume at a checkpoint written by torch.save (or by this manager), or restore the damaged files.",
      { kind: "refused", subject: c.iterDir, knob: "resume" },
    );
  }
}

/**
 * Decides the resume source (seed 001 "Resume", seed 000 "No cold restart over an artifact",
 * seed 002's pinned resume): `off` starts fresh; `auto` takes the checkpoint the latest pointer
 * names (fresh when there is none); an explicit location must exist and be complete. Within an
 * attempt holding committed artifacts, a fresh start and a checkpoint behind the newest artifact
 * are refused, naming the attempt directory and the remedies; an explicit checkpoint whose
 * iteration cannot be established is refused there too. A pin must match the manifest's SHA-256. Pure.
 */
export function decideResume(inputs: ResumeInputs): ResumeDecision {
  const { attemptDir, newestArtifact } = inputs;
  if (inputs.resume === "off") {
    if (newestArtifact !== undefined) throw refuseCold(attemptDir, newestArtifact);
    return { kind: "fresh", attemptDir, reason: "resume=off: a fresh start" };
  }
  if (inputs.resume === "auto") {
    const pointer = inputs.pointer;
    if (pointer.state === "invalid") {
      throw new ManagerError(
        "MANAGER_RESUME_POINTER_INVALID",
        `resume in ${attemptDir}: ${pointer.message} A damaged pointer never selects a resume; rewrite ${pointer.path} to name a complete iteration, or resume from an explicit one.`,
        { kind: "refused", subject: pointer.path, knob: "resume" },
      );
    }
    if (pointer.state === "absent") {
      if (newestArtifact !== undefined) throw refuseCold(attemptDir, newestArtifact);
      return { kind: "fresh", attemptDir, reason: `no latest checkpoint in ${attemptDir}: a fresh start` };
    }
    requireComplete(pointer.checkpoint, `named by ${pointer.path}`);
    if (newestArtifact !== undefined && pointer.iteration < newestArtifact.iteration) {
      throw refuseBehind(attemptDir, pointer.iteration, pointer.checkpoint.iterDir, newestArtifact);
    }
    return adopt(
      "auto",
      pointer.checkpoint,
      `resume=auto: latest complete checkpoint of ${attemptDir} (iter ${pointer.iteration})`,
    );
  }
  const explicit = inputs.explicit;
  if (explicit === undefined || "missing" in explicit) {
    const path = explicit?.path ?? inputs.resume;
    throw new ManagerError(
      "MANAGER_RESUME_NOT_FOUND",
      `resume from ${path}: nothing exists there. An explicit resume must exist; training never silently restarts from scratch. ` +
        "Fix the resume setting, or set resume=auto (latest of this attempt) or resume=off (fresh attempt).",
      { kind: "refused", subject: path, knob: "resume" },
    );
  }
  requireComplete(explicit, "resume setting");
  if (newestArtifact !== undefined) {
    if (explicit.iteration === undefined) {
      throw new ManagerError(
        "MANAGER_RESUME_ITERATION_UNKNOWN",
        `resume from ${explicit.iterDir} in ${attemptDir}: the attempt holds the committed artifact ${newestArtifact.dir} ` +
          `(iteration ${newestArtifact.iteration}), and neither an iter_* path segment nor the trainer state (optimizer_step/iter) ` +
          `says which iteration this checkpoint is, so nothing proves it is at or beyond the artifact. ${remedies(attemptDir)}`,
        { kind: "refused", subject: explicit.iterDir, knob: "resume" },
      );
    }
    if (explicit.iteration < newestArtifact.iteration) {
      throw refuseBehind(attemptDir, explicit.iteration, explicit.iterDir, newestArtifact);
    }
  }
  if (inputs.pin !== null) {
    if (explicit.manifestSha256 === undefined) {
      throw new ManagerError(
        "MANAGER_RESUME_PIN_UNAVAILABLE",
        `resume from ${explicit.iterDir}: resume_sha256 pins its manifest, but it has none (a legacy checkpoint directory). ` +
          "Drop resume_sha256, or resume from a checkpoint written with a description.",
        { kind: "refused", subject: explicit.iterDir, knob: "resume_sha256" },
      );
    }
    if (explicit.manifestSha256 !== inputs.pin) {
      throw new ManagerError(
        "MANAGER_RESUME_PIN_MISMATCH",
        `resume from ${explicit.iterDir}: its manifest has SHA-256 ${explicit.manifestSha256}, not the pinned ${inputs.pin}. ` +
          "The checkpoint is not the one the recipe names; fix resume or resume_sha256.",
        { kind: "refused", subject: explicit.iterDir, knob: "resume_sha256" },
      );
    }
  }
  return adopt(
    "explicit",
    explicit,
    `explicit resume from ${explicit.iterDir}${explicit.iteration === undefined ? "" : ` (iter ${explicit.iteration})`}`,
  );
}
