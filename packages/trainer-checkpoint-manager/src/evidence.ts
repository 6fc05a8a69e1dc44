// The raw evidence of what an attempt directory holds, which @ckpt/evidence assembles into the
// ckpt.evidence.v2 bundle and `runStatus` into its report: the resume decision the manager would
// take now, the checkpoint the pointer names, every checkpoint as retention sees it, every
// committed artifact with its archive receipt, and the problems those readers reported. It
// assembles the answers of the deciders that already exist and judges nothing itself; it writes
// nothing.
import { join } from "node:path";
import { readReceipt } from "@ckpt/archive-reader";
import {
  ARTIFACT_MANIFEST,
  type ArtifactManifest,
  artifactPayloadFiles,
  type Destination,
  type UploadedMarker,
} from "@ckpt/manifest";
import { type CheckpointInfo, scanCheckpointRoot } from "@ckpt/retention";
import { type ProbedCheckpoint, decideResume, probeFindings } from "./resume/decide.js";
import { listCommittedArtifacts, localCheckpointsRoot, readLocalPointer } from "./resume/local.js";
import type { ResumeDecision } from "./types.js";
import { throwIfAborted } from "./errors.js";
import { entryKind } from "./internal/fs.js";
import { CHECKPOINT_DESCRIPTION_FILE, checkpointDescription } from "./records.js";

/** The codes evidence gives a problem itself (a reader's error keeps its own code). */
type EvidenceProblemCode = "CHECKPOINT_INCOMPLETE" | "INTERNAL";

/** A problem a reader reported, with the code it gave (or the code of the record it concerns). */
export interface EvidenceProblem {
  readonly code: string;
  /** The file or directory concerned. */
  readonly subject: string;
  readonly message: string;
}

export interface ArtifactEvidence {
  readonly iteration: number;
  readonly dir: string;
  readonly logicalComponents: ArtifactManifest["logical_components"] | null;
  /** Every payload the manifest lists and whether it is still on local disk. */
  readonly payloads: ReadonlyArray<{ readonly path: string; readonly size: number; readonly local: boolean }>;
  /** The archive receipt (`.uploaded`), when there is one. */
  readonly receipt: {
    readonly path: string;
    readonly destination: Destination;
    readonly files: UploadedMarker["files"];
  } | null;
}

export interface EvidenceBundle {
  readonly attemptDir: string;
  /** The decision `resume=auto` would take, or its refusal with the manager's code. */
  readonly resume:
    | ResumeDecision
    | { readonly kind: "refused"; readonly code: string; readonly message: string };
  /** What `latest_checkpoint.txt` says. */
  readonly latest:
    | { readonly state: "absent" }
    | { readonly state: "invalid"; readonly path: string; readonly message: string }
    | { readonly state: "present"; readonly path: string; readonly iteration: number };
  /** The checkpoint the pointer names, as the resume probe found it (`problems` empty means complete). */
  readonly newestCheckpoint: ProbedCheckpoint | null;
  /** Every file its description records (component, size, digest when hashed); null without a readable description. */
  readonly newestCheckpointFiles: ReturnType<typeof artifactPayloadFiles> | null;
  /** Every `checkpoints/iter_*`, as retention scans it (optimizer present, upload state, latest). */
  readonly checkpoints: readonly CheckpointInfo[];
  readonly artifacts: readonly ArtifactEvidence[];
  readonly problems: readonly EvidenceProblem[];
}

function coded(error: unknown): { code: string; message: string } {
  const e = error as { code?: unknown; message?: unknown };
  return {
    code: typeof e?.code === "string" ? e.code : ("INTERNAL" satisfies EvidenceProblemCode),
    message: typeof e?.message === "string" ? e.message : String(error),
  };
}

async function artifactEvidence(
  artifact: { iteration: number; dir: string },
  problems: EvidenceProblem[],
): Promise<ArtifactEvidence> {
  const manifestPath = join(artifact.dir, ARTIFACT_MANIFEST.fileName);
  let manifest: ArtifactManifest | undefined;
  try {
    manifest = await ARTIFACT_MANIFEST.read(manifestPath);
  } catch (error) {
    problems.push({ ...coded(error), subject: manifestPath });
  }
  const payloads: Array<{ path: string; size: number; local: boolean }> = [];
  for (const component of manifest?.physical_components ?? []) {
    payloads.push({
      path: component.path,
      size: component.kind === "file" ? component.size : component.files.reduce((s, f) => s + f.size, 0),
      local: (await entryKind(join(artifact.dir, component.path))) !== "absent",
    });
  }
  let receipt: ArtifactEvidence["receipt"] = null;
  try {
    const read = await readReceipt(artifact.dir);
    receipt = { path: read.path, destination: read.marker.destination, files: read.marker.files };
  } catch (error) {
    const failure = coded(error);
    if (failure.code !== "READER_RECEIPT_MISSING") problems.push({ ...failure, subject: artifact.dir });
  }
  return {
    iteration: artifact.iteration,
    dir: artifact.dir,
    logicalComponents: manifest?.logical_components ?? null,
    payloads,
    receipt,
  };
}

export interface CollectOptions {
  /** Cancels the collection (`MANAGER_ABORTED`), the scan of every checkpoint included. */
  readonly signal?: AbortSignal;
}

/** Collects the evidence of a local run attempt directory (`<...>/<RUN_TS>`). Read-only. */
export async function collectEvidence(
  attemptDir: string,
  options: CollectOptions = {},
): Promise<EvidenceBundle> {
  const { signal } = options;
  const problems: EvidenceProblem[] = [];
  const checkpointsRoot = localCheckpointsRoot(attemptDir);
  // The checkpoint resume would take is judged as `ckpt verify` judges it, digests included.
  const pointer = await readLocalPointer(checkpointsRoot);
  const committed = await listCommittedArtifacts(attemptDir);
  const newestArtifact = committed.at(-1);

  let resume: EvidenceBundle["resume"];
  try {
    resume = decideResume({
      resume: "auto",
      attemptDir,
      pin: null,
      pointer,
      ...(newestArtifact === undefined ? {} : { newestArtifact }),
    });
  } catch (error) {
    const failure = coded(error);
    resume = { kind: "refused", ...failure };
    problems.push({ ...failure, subject: attemptDir });
  }
  const newestCheckpoint = pointer.state === "present" ? pointer.checkpoint : null;
  let newestCheckpointFiles: EvidenceBundle["newestCheckpointFiles"] = null;
  if (newestCheckpoint !== null && newestCheckpoint.format !== "legacy_file") {
    const path = join(newestCheckpoint.iterDir, CHECKPOINT_DESCRIPTION_FILE);
    if ((await entryKind(path)) === "file") {
      try {
        newestCheckpointFiles = artifactPayloadFiles(await checkpointDescription.read(path));
      } catch (error) {
        problems.push({ ...coded(error), subject: path });
      }
    }
  }
  for (const problem of newestCheckpoint === null ? [] : probeFindings(newestCheckpoint)) {
    problems.push({
      code: "CHECKPOINT_INCOMPLETE" satisfies EvidenceProblemCode,
      subject: newestCheckpoint!.iterDir,
      message: problem,
    });
  }

  let checkpoints: CheckpointInfo[] = [];
  throwIfAborted(signal, `collect evidence of ${attemptDir}`);
  try {
    checkpoints = await scanCheckpointRoot(checkpointsRoot, signal === undefined ? {} : { signal });
  } catch (error) {
    throwIfAborted(signal, `collect evidence of ${attemptDir}`);
    problems.push({ ...coded(error), subject: checkpointsRoot });
  }
  const artifacts: ArtifactEvidence[] = [];
  for (const artifact of committed) {
    throwIfAborted(signal, `collect evidence of ${attemptDir}`);
    artifacts.push(await artifactEvidence(artifact, problems));
  }

  return {
    attemptDir,
    resume,
    latest:
      pointer.state === "present"
        ? { state: "present", path: pointer.path, iteration: pointer.iteration }
        : pointer,
    newestCheckpoint,
    newestCheckpointFiles,
    checkpoints,
    artifacts,
    problems,
  };
}
