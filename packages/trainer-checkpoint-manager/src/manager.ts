import type { ManagerConfig } from "./config.js";
import { ManagerError } from "./errors.js";
import type { AttemptDecision } from "./layout.js";
import type { SaveDue, SavePlan } from "./plan.js";
import type {
  CommitOptions,
  OpenOptions,
  PublicationReport,
  ResumeDecision,
  SaveOutcome,
  SaveSession,
  StopReason,
} from "./types.js";

function notYet(what: string): never {
  throw new ManagerError("MANAGER_NOT_IMPLEMENTED", `${what} is not implemented yet.`, { kind: "failed" });
}

/**
 * Owns one run attempt's checkpoints: layout, save plans, commits, the latest pointer, retention,
 * archive upload, the validation transaction and resume resolution. The trainer only writes the
 * component files at the targets `beginSave` hands out.
 */
export class CheckpointManager {
  readonly config: ManagerConfig;
  readonly attempt: AttemptDecision;
  readonly attemptDir: string;
  readonly runTs: string;
  /** The checkpoints root: a local directory, or the store URI of a direct object-store primary. */
  readonly checkpointsRoot: string;
  readonly rank: number;

  private constructor(
    config: ManagerConfig,
    attempt: AttemptDecision,
    checkpointsRoot: string,
    rank: number,
  ) {
    this.config = config;
    this.attempt = attempt;
    this.attemptDir = attempt.attemptDir;
    this.runTs = attempt.runTs;
    this.checkpointsRoot = checkpointsRoot;
    this.rank = rank;
  }

  /** Resolves the run attempt (minting RUN_TS at the first launch), creates it, and starts the termination watch. */
  static async open(_options: OpenOptions): Promise<CheckpointManager> {
    return notYet("CheckpointManager.open");
  }

  /** Decides where training resumes from; refusals throw `ManagerError`. */
  async resolveResume(): Promise<ResumeDecision> {
    return notYet("resolveResume");
  }

  /** The save due at `step` given what this attempt already committed for it (see the pure `planSave`). */
  planSave(_step: number, _due: SaveDue): SavePlan | undefined {
    return notYet("planSave");
  }

  /** Joins the previous in-flight commit of the roles involved, prepares the iteration directory and hands out targets. */
  async beginSave(_step: number, _plan: SavePlan): Promise<SaveSession> {
    return notYet("beginSave");
  }

  /** Fsyncs, describes and commits the written components; under `save_async` returns once scheduled. */
  async commitSave(_session: SaveSession, _options: CommitOptions = {}): Promise<SaveOutcome> {
    return notYet("commitSave");
  }

  /** Moves a validated checkpoint from evaluation-pending to published (or retries a pending publication). */
  async completeValidation(_iteration: number): Promise<PublicationReport> {
    return notYet("completeValidation");
  }

  /** A termination request seen so far (sentinel file, SIGUSR1 or SIGTERM); poll it at step boundaries. */
  stopRequested(): StopReason | undefined {
    return notYet("stopRequested");
  }

  /** Joins every in-flight commit, releases the writer lease and removes the signal handlers. */
  async finalize(): Promise<void> {
    return notYet("finalize");
  }
}
