// `ckpt resumable`'s answer: would training resume from this checkpoint? The manager's own resume
// decision for `resume=<path>` (probe, the attempt's newest artifact, an optional pin), or its
// refusal as a report. Read-only; rendering is the caller's.
import { classifyIterPath, LATEST_POINTER } from "@ckpt/manifest";
import { decideResume, probeFindings } from "./resume/decide.js";
import { listCommittedArtifacts, localCheckpointsRoot, probeLocalCheckpoint } from "./resume/local.js";
import type { ResumeDecision } from "./types.js";

/** The answer: the manager's resume decision for `resume=<iter-dir>`, or its refusal. */
export interface ResumableReport {
  readonly ok: boolean;
  readonly resumable: boolean;
  readonly path: string;
  /** Why (the manager's reason), or the refusal's message. */
  readonly reason: string;
  /** The refusal's code (`MANAGER_RESUME_INCOMPLETE`, `MANAGER_RESUME_BEHIND_ARTIFACT`, ...). */
  readonly code: string | null;
  readonly iteration: number | null;
  readonly format: string | null;
  readonly components: Readonly<Record<string, string>>;
  readonly manifestSha256: string | null;
  /** The validation transaction the checkpoint is in, when it is not published. */
  readonly validation: string | null;
  /** `latest_checkpoint.txt` of its attempt names it (null when it is not under a checkpoints/ root). */
  readonly latest: boolean | null;
  /** What the probe found missing or wrong (empty when complete). */
  readonly problems: readonly string[];
}

/**
 * Decides whether training would resume from `path` (a checkpoints/iter_* directory or a legacy
 * single file), optionally pinned by its manifest SHA-256 (lower-case hex). A refusal is a report
 * (`resumable: false` with its code); only an unexpected failure throws.
 */
export async function checkResumable(path: string, pin: string | null): Promise<ResumableReport> {
  // Under checkpoints/ (or checkpoint_artifacts/): its attempt holds the pointer and the artifacts.
  const where = classifyIterPath(path);
  const probe = await probeLocalCheckpoint(path, {
    needIteration: true,
    hashLegacyFile: pin !== null,
  });
  const problems = "missing" in probe ? [] : probeFindings(probe);
  const newestArtifact =
    where === undefined ? undefined : (await listCommittedArtifacts(where.attemptDir)).at(-1);
  let latest: boolean | null = null;
  if (where !== undefined) {
    const pointer = await LATEST_POINTER.read(
      `${localCheckpointsRoot(where.attemptDir)}/${LATEST_POINTER.fileName}`,
    )
      .then((p) => p.iteration)
      .catch(() => undefined);
    latest = pointer === where.iteration;
  }
  let decision: ResumeDecision;
  try {
    decision = decideResume({
      resume: path,
      attemptDir: where?.attemptDir ?? path,
      pin,
      pointer: { state: "absent" },
      explicit: probe,
      ...(newestArtifact === undefined ? {} : { newestArtifact }),
    });
  } catch (error) {
    const refusal = error as { code?: unknown; kind?: unknown; message?: unknown };
    if (typeof refusal.code !== "string") throw error;
    return {
      ...notResumable(path),
      reason: String(refusal.message),
      code: refusal.code,
      iteration: "missing" in probe ? null : (probe.iteration ?? null),
      latest,
      problems,
    };
  }
  if (decision.kind !== "checkpoint") throw new Error(`an explicit resume decided ${decision.kind}`);
  return {
    ok: true,
    resumable: true,
    path,
    reason: decision.reason,
    code: null,
    iteration: decision.iteration ?? null,
    format: decision.format,
    components: { ...decision.components },
    manifestSha256: decision.manifestSha256 ?? null,
    validation: decision.validation ?? null,
    latest,
    problems,
  };
}

function notResumable(path: string): ResumableReport {
  return {
    ok: false,
    resumable: false,
    path,
    reason: "",
    code: null,
    iteration: null,
    format: null,
    components: {},
    manifestSha256: null,
    validation: null,
    latest: null,
    problems: [],
  };
}
