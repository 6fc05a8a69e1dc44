import { join, resolve } from "node:path";
import type { LogicalComponent } from "@ckpt/manifest";
import { configWarnings, type ManagerConfig } from "./config.js";
import { isNoSpace } from "@ckpt/errors";
import { ManagerError, messageOf, noSpace } from "./errors.js";
import { openAt, type StoreAccess } from "./internal/store.js";
import { type AttemptDecision, RESUME_CACHE_DIR, targetsFor } from "./layout.js";
import type { CommitRecord } from "./local/commit.js";
import { openAttempt } from "./open.js";
import { planSave as decidePlan, type SaveDue, type SavePlan, type StepCoverage } from "./plan.js";
import { type Primary, UPLOAD_DISABLED } from "./primary.js";
import { probeRemote } from "./remote/probe.js";
import { decideResume, type PointerState, type ProbedCheckpoint } from "./resume/decide.js";
import { probeLocalCheckpoint } from "./resume/local.js";
import { WriteSlots } from "./slots.js";
import { sentinelPathFor, TerminationWatch } from "./termination.js";
import { AttemptWindowLog } from "./windows.js";
import type {
  CommitOptions,
  CommitReport,
  ManagerEvent,
  OpenOptions,
  PublicationReport,
  ResumeDecision,
  SaveOutcome,
  SaveSession,
  StopReason,
  UploadOutcome,
  ValidationState,
} from "./types.js";

/** This package's version (from its package.json at build time), recorded as the producer of what it commits. */
export const MANAGER_VERSION: string = __CKPT_PACKAGE_VERSION__;
const DEFAULT_PRODUCER = `ckpt-trainer-checkpoint-manager/${MANAGER_VERSION}`;
/** The write slot of a single-role trainer. */
const SINGLE_ROLE = "default";

function isStoreUri(value: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//.test(value);
}

/**
 * Owns one run attempt's checkpoints: layout, save plans, commits, the latest pointer, retention,
 * archive upload, the validation transaction and resume resolution. The trainer only writes the
 * component files at the targets `beginSave` hands out. Where the checkpoints live (a local
 * directory or a direct object-store prefix) is its `Primary`'s business.
 */
export class CheckpointManager {
  readonly config: ManagerConfig;
  readonly attempt: AttemptDecision;
  readonly attemptDir: string;
  readonly runTs: string;
  /** The checkpoints root: a local directory, or the store URI of a direct object-store primary. */
  readonly checkpointsRoot: string;
  readonly rank: number;
  readonly worldSize: number;

  private readonly primary: Primary;
  private readonly access: StoreAccess;
  private readonly watch: TerminationWatch;
  private readonly slots = new WriteSlots();
  private readonly coverage = new Map<number, StepCoverage>();
  private readonly open = new Map<number, SaveSession>();
  private nextSession = 1;
  private finalized = false;
  private windowLog: AttemptWindowLog | undefined;
  private readonly clock: () => Date;

  private constructor(
    options: OpenOptions,
    opened: { attempt: AttemptDecision; primary: Primary; access: StoreAccess },
    private readonly emit: (event: ManagerEvent) => void,
  ) {
    this.config = options.config;
    this.attempt = opened.attempt;
    this.attemptDir = opened.attempt.attemptDir;
    this.runTs = opened.attempt.runTs;
    this.primary = opened.primary;
    this.checkpointsRoot = opened.primary.checkpointsRoot;
    this.access = opened.access;
    this.rank = options.rank ?? 0;
    this.worldSize = options.worldSize ?? 1;
    this.clock = options.clock ?? (() => new Date());
    this.watch = new TerminationWatch(
      sentinelPathFor(options.termination, process.env),
      options.termination?.signals ?? true,
      (reason) => this.emit({ type: "stop_requested", reason }),
    );
  }

  /**
   * Resolves and claims the run attempt and opens its primary (see `openAttempt`), counts the
   * artifacts it already committed, and starts the termination watch.
   */
  static async open(options: OpenOptions): Promise<CheckpointManager> {
    const emit = (event: ManagerEvent): void => {
      try {
        options.onEvent?.(event);
      } catch {
        // A listener's failure never breaks a save (or the lease).
      }
    };
    const opened = await openAttempt(options, options.producer ?? DEFAULT_PRODUCER, emit);
    try {
      const manager = new CheckpointManager(options, opened, emit);
      // Rank 0 holds the attempt (its writer lock or lease): it alone appends to the windows log.
      if (manager.rank === 0) {
        manager.windowLog = await AttemptWindowLog.open(manager.attemptDir, manager.clock(), (message) =>
          emit({ type: "warning", message }),
        );
      }
      emit({ type: "attempt", attempt: opened.attempt });
      for (const message of configWarnings(options.config)) emit({ type: "warning", message });
      for (const { iteration, components } of await opened.primary.artifactCoverage())
        manager.cover(iteration, "artifact", components);
      return manager;
    } catch (error) {
      await opened.primary.release();
      throw error;
    }
  }

  private get roleSlots(): readonly string[] {
    return this.config.roles.length > 0 ? this.config.roles : [SINGLE_ROLE];
  }

  private requireOpen(what: string): void {
    if (this.finalized) {
      throw new ManagerError("MANAGER_FINALIZED", `${what}: the manager was finalized. Open a new one.`, {
        kind: "refused",
      });
    }
  }

  private cover(step: number, kind: "full" | "artifact", components: readonly LogicalComponent[]): void {
    const current = this.coverage.get(step) ?? { full: false };
    this.coverage.set(
      step,
      kind === "full" ? { ...current, full: true } : { ...current, artifact: [...components] },
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Resume

  /**
   * Decides where training resumes from (see the pure `decideResume`): `off` fresh, `auto` the
   * latest complete checkpoint of this attempt, an explicit path (or, under a direct primary, an
   * `s3://…/iter_*`) that must exist and be complete, optionally pinned by its manifest SHA-256.
   * Refusals (no cold restart over an artifact, none behind it, pin mismatch) throw ManagerError.
   */
  async resolveResume(): Promise<ResumeDecision> {
    this.requireOpen("resolve resume");
    const { resume, resume_sha256: pin } = this.config;
    const newestArtifact = await this.primary.newestArtifact();
    let pointer: PointerState = { state: "absent" };
    if (resume === "auto") pointer = await this.primary.readPointer();
    let explicit: ProbedCheckpoint | { missing: true; path: string } | undefined;
    if (resume !== "auto" && resume !== "off") {
      if (isStoreUri(resume)) {
        const store = await openAt(resume.replace(/\/+$/, ""), this.access);
        explicit = await probeRemote(store, "", join(this.attemptDir, RESUME_CACHE_DIR));
      } else {
        explicit = await probeLocalCheckpoint(resolve(resume), {
          needIteration: newestArtifact !== undefined,
          hashLegacyFile: pin !== null,
        });
      }
    }
    const decision = decideResume({
      resume,
      attemptDir: this.attemptDir,
      pin,
      pointer,
      ...(explicit === undefined ? {} : { explicit }),
      ...(newestArtifact === undefined ? {} : { newestArtifact }),
    });
    if (
      decision.kind === "checkpoint" &&
      decision.iteration !== undefined &&
      decision.format !== "legacy_file"
    ) {
      this.cover(decision.iteration, "full", []);
    }
    this.emit({ type: "resume", decision });
    return decision;
  }

  // ---------------------------------------------------------------------------------------------
  // Saving

  /** The save due at `step` given what this attempt already committed for it (see the pure `planSave`). */
  planSave(step: number, due: SaveDue): SavePlan | undefined {
    return decidePlan(this.config, step, due, this.coverage.get(step));
  }

  /** Target paths for a plan, as `beginSave` hands them out (pure; every rank computes the same). */
  targetsFor(step: number, plan: Pick<SavePlan, "kind" | "components">) {
    return targetsFor(this.attemptDir, step, plan, this.config.checkpoint_format, {
      ...(this.config.roles.length > 0 ? { roles: this.config.roles } : {}),
      ...this.primary.targetOptions,
    });
  }

  /**
   * Prepares a save: joins the previous in-flight commit of the roles, then (rank 0) clears what
   * an interrupted save of the same step left at the targets and creates the iteration directory.
   * A committed full checkpoint or artifact is never rewritten: saving into one is refused. With
   * several ranks, every rank calls this and then waits at a barrier before writing.
   */
  async beginSave(step: number, plan: SavePlan): Promise<SaveSession> {
    this.requireOpen("begin save");
    if (plan.step !== step) {
      throw new ManagerError(
        "MANAGER_SESSION_INVALID",
        `begin save at step ${step}: the plan was made for step ${plan.step}.`,
        {
          kind: "input",
        },
      );
    }
    await this.slots.join(this.roleSlots);
    this.primary.assertHeld(`begin save at step ${step}`);
    if (plan.escalated) {
      this.emit({
        type: "warning",
        message:
          `emergency save at step ${step}: the step's committed artifact does not cover the run plan plus model and is never ` +
          "re-committed, so the full plan is written instead.",
      });
    }
    const { dir, targets, roles } = this.targetsFor(step, plan);
    const alreadyCommitted = await this.primary.prepareSave({ step, plan, dir }, this.rank === 0);
    const session: SaveSession = {
      id: this.nextSession++,
      step,
      plan,
      dir,
      targets,
      ...(roles === undefined ? {} : { roles }),
      alreadyCommitted,
    };
    this.open.set(session.id, session);
    return session;
  }

  private requireSession(session: SaveSession): void {
    if (this.open.get(session.id) !== session) {
      throw new ManagerError(
        "MANAGER_SESSION_INVALID",
        `commit save of step ${session.step}: the session is not open here (committed already, or from another manager).`,
        { kind: "input" },
      );
    }
  }

  private checkRoles(options: CommitOptions): void {
    const roles = this.config.roles;
    if (roles.length === 0) return;
    const given = Object.keys(options.roles ?? {}).sort();
    const expected = [...roles].sort();
    const steps = Object.values(options.roles ?? {}).map((r) => r.optimizerStep);
    if (given.join(",") !== expected.join(",") || steps.some((s) => !Number.isSafeInteger(s) || s < 0)) {
      throw new ManagerError(
        "MANAGER_ROLES_MISMATCH",
        `commit multi-role boundary: pass the optimizer counter (an integer >= 0) of exactly the roles ${expected.join(", ")}; got ${given.join(", ") || "none"}.`,
        { kind: "input", knob: "roles" },
      );
    }
  }

  /**
   * Commits what the trainer wrote: fsync, describe, commit record (description, `_SUCCESS`,
   * artifact manifest or control manifest), `latest_checkpoint.txt` for a full checkpoint, then
   * archive upload and retention, all in the roles' write slot. Under `save_async` (local
   * primary) it returns once scheduled; a direct primary always commits before returning.
   */
  async commitSave(session: SaveSession, options: CommitOptions = {}): Promise<SaveOutcome> {
    this.requireOpen("commit save");
    this.requireSession(session);
    if (this.rank !== 0) {
      this.open.delete(session.id);
      return { status: "not_rank_zero" };
    }
    if (options.written !== undefined && this.config.checkpoint_format === "dcp") {
      throw new ManagerError(
        "MANAGER_ASYNC_DCP_BULK",
        "commit save: DCP model/optimizer writes stay synchronous (every rank writes its shards); only the commit tail runs in the background. Commit after the DCP save returns, without `written`.",
        { kind: "input", knob: "save_async" },
      );
    }
    this.checkRoles(options);
    // Usage is checked: from here the session is spent, whatever the commit's outcome.
    this.open.delete(session.id);
    const job = async (): Promise<CommitReport> => {
      this.primary.assertHeld(`commit save of step ${session.step}`);
      if (options.written !== undefined) {
        try {
          await options.written;
        } catch (error) {
          if (isNoSpace(error)) {
            throw noSpace(
              `save step ${session.step}: the disk filled while the trainer wrote into ${session.dir} (${messageOf(error)})`,
              session.dir,
              error,
            );
          }
          throw new ManagerError(
            "MANAGER_COMMIT_FAILED",
            `save step ${session.step}: the trainer's write failed (${messageOf(error)}); nothing was committed.`,
            { kind: "failed", subject: session.dir, cause: error },
          );
        }
      }
      return this.commit(session, options);
    };
    if (this.primary.commitsInBackground && this.config.save_async) {
      const completion = this.slots.schedule(this.roleSlots, job, true);
      completion.catch((error: unknown) =>
        this.emit({
          type: "async_failed",
          code: (error as ManagerError).code ?? "ERROR",
          kind: (error as ManagerError).kind ?? "failed",
          message: messageOf(error),
        }),
      );
      return { status: "scheduled", completion };
    }
    return { status: "committed", report: await this.slots.schedule(this.roleSlots, job, false) };
  }

  /**
   * The commit tail in the roles' write slot: the primary's commit record (and pointer for a full
   * checkpoint), then coverage and events, then the archive upload and retention. A full
   * checkpoint with validation pending is archived and retained only once it is published.
   */
  private async commit(session: SaveSession, options: CommitOptions): Promise<CommitReport> {
    const { plan, step } = session;
    if (plan.kind === "artifact") {
      const record = await this.primary.commitArtifact(session, options);
      this.cover(step, "artifact", plan.components);
      const upload = await this.primary.archive("artifact", step, "best_effort");
      return this.report(session, record, false, "none", upload, undefined);
    }
    const committed = await this.primary.commitFull(session, options);
    this.cover(step, "full", plan.components);
    this.emit({ type: "pointer", iteration: step, path: committed.pointer });
    if (committed.pending) {
      this.emit({ type: "validation", iteration: step, state: "evaluation_pending" });
      const upload = await this.primary.archive("full", step, "deferred");
      return this.report(session, committed.record, true, "evaluation_pending", upload, undefined);
    }
    // Archive first, then retention (which is upload-gated), in this save's write job.
    const upload = await this.primary.archive("full", step, "best_effort");
    const retention = await this.primary.retain();
    return this.report(session, committed.record, true, "none", upload, retention);
  }

  private report(
    session: SaveSession,
    record: CommitRecord,
    pointerAdvanced: boolean,
    validation: CommitReport["validation"],
    upload: UploadOutcome,
    retention: CommitReport["retention"],
  ): CommitReport {
    const report: CommitReport = {
      kind: session.plan.kind,
      iteration: session.step,
      dir: session.dir,
      manifest: record.path,
      manifestSha256: record.sha256,
      pointerAdvanced,
      validation,
      upload,
      ...(retention === undefined ? {} : { retention }),
      bytes: record.bytes,
    };
    this.emit({ type: "committed", report });
    return report;
  }

  // ---------------------------------------------------------------------------------------------
  // Validation transaction

  /**
   * Completes the validation transaction of a full checkpoint after its validation succeeded:
   * evaluation-pending → publication-pending → (strict archive upload, retention) → published.
   * Called again for a publication-pending checkpoint (after a resume) it only retries the
   * publication. A failed publication throws and leaves the checkpoint publication-pending.
   */
  async completeValidation(iteration: number): Promise<PublicationReport> {
    this.requireOpen("complete validation");
    await this.slots.join();
    if (this.rank !== 0) {
      throw new ManagerError("MANAGER_BAD_ARGUMENT", "complete validation: only rank 0 publishes.", {
        kind: "input",
      });
    }
    this.primary.assertHeld(`complete validation of iteration ${iteration}`);
    const state = await this.primary.validationState(iteration);
    if (state === "published") return { iteration, state, upload: UPLOAD_DISABLED };
    if (state === "evaluation_pending") await this.advanceValidation(iteration, "publication_pending");
    const upload = await this.primary.archive("full", iteration, "strict");
    await this.advanceValidation(iteration, "published");
    // Retention counts the checkpoint once it is published, so it runs last.
    const retention = await this.primary.retain();
    return { iteration, state: "published", upload, ...(retention === undefined ? {} : { retention }) };
  }

  private async advanceValidation(iteration: number, state: ValidationState): Promise<void> {
    await this.primary.writeValidation(iteration, state);
    this.emit({ type: "validation", iteration, state });
  }

  // ---------------------------------------------------------------------------------------------
  // Termination and lifecycle

  /** A termination request seen so far (sentinel file, SIGUSR1 or SIGTERM); poll it at step boundaries. */
  stopRequested(): StopReason | undefined {
    return this.watch.poll();
  }

  /**
   * Joins every in-flight commit (throwing a background failure after cleaning up), releases the
   * writer lease and removes the signal handlers. Call it before a clean exit.
   */
  async finalize(): Promise<void> {
    if (this.finalized) return;
    try {
      await this.slots.join();
    } finally {
      this.finalized = true;
      this.watch.stop();
      await this.windowLog?.end(this.clock());
      await this.primary.release();
    }
  }
}
