// checkResumed: did the job come back where it should have? What the job says it resumed at is
// compared with the newest complete checkpoint its attempt held when the job started, so "came
// back and started at step 0" is one sentence and a failed check.
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { CHECKPOINTS_DIR, parseIterDir } from "@ckpt/manifest";
import {
  CHECKPOINT_DESCRIPTION_FILE,
  probeLocalCheckpoint,
  probeFindings,
} from "@ckpt/trainer-checkpoint-manager";
import { problem, problemFromError } from "./build.js";
import type { EvidenceProblem } from "./schema.js";

export const RESUMED_SCHEMA = "ckpt.resumed.v1";

export interface ResumedReport {
  readonly schema: typeof RESUMED_SCHEMA;
  readonly ok: boolean;
  readonly attempt_dir: string;
  readonly reported_step: number;
  /** The job's start (ISO 8601): checkpoints committed later do not count. */
  readonly started_at: string;
  /** The newest complete checkpoint committed before the start, or null when there was none. */
  readonly expected: {
    readonly iteration: number;
    readonly dir: string;
    readonly committed_at: string;
  } | null;
  /** The verdict in one sentence. */
  readonly sentence: string;
  readonly problems: readonly EvidenceProblem[];
}

export interface ResumedOptions {
  /** When the job started (default: now, so every checkpoint committed so far counts). */
  readonly startedAt?: Date;
  /** Checkpoint directories examined at most, newest first (default 20,000). */
  readonly maxEntries?: number;
}

/** When a checkpoint was committed: its description's time, else its directory's. */
async function committedAt(dir: string): Promise<Date> {
  const described = await stat(join(dir, CHECKPOINT_DESCRIPTION_FILE)).catch(() => undefined);
  return (described ?? (await stat(dir))).mtime;
}

/** The verdict, pure: the job's step against the step it should have resumed at. */
export function resumedVerdict(
  reportedStep: number,
  expected: number | null,
): { ok: boolean; code: "RESUMED_BEHIND" | "RESUMED_AHEAD" | null; sentence: string } {
  if (expected === null)
    return reportedStep === 0
      ? {
          ok: true,
          code: null,
          sentence: "no complete checkpoint existed when the job started; it started at step 0, as it should",
        }
      : {
          ok: false,
          code: "RESUMED_AHEAD",
          sentence: `the job says it resumed at step ${reportedStep}, but no complete checkpoint existed when it started`,
        };
  if (reportedStep === expected)
    return {
      ok: true,
      code: null,
      sentence: `the job resumed at step ${expected}, the newest complete checkpoint when it started`,
    };
  if (reportedStep < expected)
    return {
      ok: false,
      code: "RESUMED_BEHIND",
      sentence:
        reportedStep === 0
          ? `the job came back and started at step 0, although iteration ${expected} was complete when it started`
          : `the job resumed at step ${reportedStep}, behind iteration ${expected} that was complete when it started (${expected - reportedStep} steps lost)`,
    };
  return {
    ok: false,
    code: "RESUMED_AHEAD",
    sentence: `the job says it resumed at step ${reportedStep}, but the newest complete checkpoint when it started was iteration ${expected}`,
  };
}

/**
 * Compares the step a job reports it resumed at with the newest complete checkpoint (probed as a
 * resume probes it) its attempt held when the job started. Read-only; never throws for what it finds.
 */
export async function checkResumed(
  attemptDir: string,
  reportedStep: number,
  options: ResumedOptions = {},
): Promise<ResumedReport> {
  const startedAt = options.startedAt ?? new Date();
  const problems: EvidenceProblem[] = [];
  let expected: ResumedReport["expected"] = null;
  const root = join(attemptDir, CHECKPOINTS_DIR);
  try {
    const iterations = (await readdir(root))
      .map((name) => ({ name, iteration: parseIterDir(name) }))
      .filter((e): e is { name: string; iteration: number } => e.iteration !== undefined)
      .sort((a, b) => b.iteration - a.iteration)
      .slice(0, options.maxEntries ?? 20_000);
    for (const { name, iteration } of iterations) {
      const dir = join(root, name);
      const at = await committedAt(dir);
      if (at.getTime() >= startedAt.getTime()) continue;
      const probe = await probeLocalCheckpoint(dir, { needIteration: false, hashLegacyFile: false });
      if ("missing" in probe || probeFindings(probe).length > 0) continue;
      expected = { iteration, dir, committed_at: at.toISOString() };
      break;
    }
  } catch (error) {
    // An attempt without checkpoints/ had nothing to resume from; anything else is a problem.
    if ((error as { code?: unknown }).code !== "ENOENT") problems.push(problemFromError(error, root));
  }
  const verdict = resumedVerdict(reportedStep, expected?.iteration ?? null);
  if (verdict.code !== null) problems.push(problem(verdict.code, attemptDir, verdict.sentence));
  return {
    schema: RESUMED_SCHEMA,
    ok: problems.every((p) => p.severity !== "error"),
    attempt_dir: attemptDir,
    reported_step: reportedStep,
    started_at: startedAt.toISOString(),
    expected,
    sentence: verdict.sentence,
    problems,
  };
}
