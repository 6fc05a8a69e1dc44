// What the manager's local retention would release after the attempt's next save, decided by
// retention's own planners on what the evidence bundle says of each checkpoint. The knobs are the
// trainer's settings, which a run does not record on disk, so the caller names them.
import type { EvidenceAttempt } from "@ckpt/evidence";
import {
  type CheckpointInfo,
  planModelRetention,
  planOptimizerRetention,
  type RetentionKeepReason,
  type RetentionTarget,
  type UploadState,
} from "@ckpt/retention";

/** The trainer's retention settings (`keep_model_last`, `keep_optim_last`, `upload.enabled`). */
export interface RetentionKnobs {
  readonly keep_model_last: number;
  readonly keep_optim_last: number;
  readonly upload: boolean;
}

interface OutlookRow {
  readonly target: RetentionTarget;
  readonly iteration: number;
  readonly dir: string;
}

export interface RetentionOutlook {
  readonly knobs: RetentionKnobs;
  /** Released by the save after the newest one, oldest first (whole directories, then optimizer state). */
  readonly release: readonly OutlookRow[];
  /** Kept, with retention's reason. */
  readonly keep: ReadonlyArray<OutlookRow & { readonly reason: RetentionKeepReason }>;
  /** One sentence on what the knobs mean here. */
  readonly summary: string;
}

const UPLOAD_STATES: readonly string[] = ["none", "legacy", "receipt"] satisfies UploadState[];
/** The save that has not happened yet: newest, committed (the pointer names it), not archived. */
const NEXT_SAVE = "(the next save)";

/**
 * Model retention then optimizer retention, as the manager applies them after a save, over the
 * attempt's checkpoints plus the next save. An upload state retention does not know counts as not
 * uploaded (kept while upload is on). Pure.
 */
export function retentionOutlook(attempt: EvidenceAttempt, knobs: RetentionKnobs): RetentionOutlook {
  const newest = Math.max(-1, ...attempt.checkpoints.map((c) => c.iteration));
  const infos: CheckpointInfo[] = [
    ...attempt.checkpoints.map((c) => ({
      iteration: c.iteration,
      dir: c.dir,
      hasOptimizer: c.retention.has_optimizer,
      uploaded: (UPLOAD_STATES.includes(c.retention.upload) ? c.retention.upload : "none") as UploadState,
      isLatest: false,
    })),
    { iteration: newest + 1, dir: NEXT_SAVE, hasOptimizer: true, uploaded: "none", isLatest: true },
  ];
  const options = { requireUploaded: knobs.upload };
  const release: OutlookRow[] = [];
  const keep: Array<OutlookRow & { reason: RetentionKeepReason }> = [];
  let remaining = infos;
  if (knobs.keep_model_last > 0) {
    const plan = planModelRetention(infos, { ...options, keepLast: knobs.keep_model_last });
    release.push(...plan.remove);
    const gone = new Set(plan.remove.map((r) => r.dir));
    remaining = infos.filter((i) => !gone.has(i.dir));
    keep.push(...plan.keep.map((k) => ({ target: plan.target, ...k })));
  }
  if (knobs.keep_optim_last > 0) {
    const plan = planOptimizerRetention(remaining, { ...options, keepLast: knobs.keep_optim_last });
    release.push(...plan.remove);
    keep.push(...plan.keep.map((k) => ({ target: plan.target, ...k })));
  }
  const summary =
    knobs.keep_model_last === 0 && knobs.keep_optim_last === 0
      ? "keep_model_last and keep_optim_last are 0: retention keeps every checkpoint"
      : `after the next save, keep_model_last=${knobs.keep_model_last} and keep_optim_last=${knobs.keep_optim_last}${knobs.upload ? " (upload on: only archived checkpoints go)" : ""} release ${release.length === 0 ? "nothing" : release.map((r) => `${r.target === "iteration" ? "iteration" : "the optimizer state of"} ${r.iteration}`).join(", ")}`;
  return {
    knobs,
    release,
    keep: keep.filter((k) => k.dir !== NEXT_SAVE),
    summary,
  };
}
