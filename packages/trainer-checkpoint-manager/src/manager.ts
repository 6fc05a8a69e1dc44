import { mkdir, readdir, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  ARTIFACT_MANIFEST,
  LATEST_POINTER,
  CHECKPOINT_ARTIFACTS_DIR,
  CHECKPOINTS_DIR,
  formatIterDir,
  isRunTs,
  type LogicalComponent,
  parseIterDir,
  PHYSICAL_COMPONENTS,
  physicalComponentPath,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { applyLocalRetention, archiveArtifact, archiveFullCheckpoint, archiveUri } from "./archive.js";
import { configWarnings, type ManagerConfig } from "./config.js";
import { ManagerError, messageOf } from "./errors.js";
import { entryKind, removeOwned } from "./internal/fs.js";
import { bucketUri, joinUri, openAt, type StoreAccess } from "./internal/store.js";
import {
  type AttemptDecision,
  decideAttempt,
  defaultPrefixFor,
  refuseLegacyFresh,
  targetsFor,
} from "./layout.js";
import {
  commitArtifactLocal,
  commitFullLocal,
  type CommitRecord,
  writeLatestPointer,
  writeValidationState,
} from "./local/commit.js";
import { planSave as decidePlan, type SaveDue, type SavePlan, type StepCoverage } from "./plan.js";
import { WriterLock } from "./local/writer-lock.js";
import { VALIDATION_STATE_FILE, validationRecord } from "./records.js";
import { DirectPrimary, probeRemote } from "./remote/direct.js";
import { WriterLease } from "./remote/lease.js";
import { decideResume, type PointerState, type ProbedCheckpoint } from "./resume/decide.js";
import { listCommittedArtifacts, probeLocalCheckpoint, readLocalPointer } from "./resume/local.js";
import { WriteSlots } from "./slots.js";
import { sentinelPathFor, TerminationWatch } from "./termination.js";
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

/** This package's version, recorded as the producer of what it commits. */
export const MANAGER_VERSION = "0.1.0";
const DEFAULT_PRODUCER = `ckpt-trainer-checkpoint-manager/${MANAGER_VERSION}`;
/** The write slot of a single-role trainer. */
const SINGLE_ROLE = "default";
/** Below the attempt directory: staged control files of a direct primary, and control files copied for a resume. */
const STAGING_DIR = ".ckpt-staging";
const RESUME_CACHE_DIR = ".ckpt-resume";

const DISABLED: UploadOutcome = { status: "disabled" };

function isStoreUri(value: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//.test(value);
}

async function runTsDirs(nameDir: string): Promise<string[]> {
  try {
    const entries = await readdir(nameDir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && isRunTs(e.name)).map((e) => e.name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}

/** The iteration `latest_checkpoint.txt` names, or undefined (absent or unreadable). */
async function latestIteration(checkpointsRoot: string): Promise<number | undefined> {
  try {
    return (await LATEST_POINTER.read(join(checkpointsRoot, "latest_checkpoint.txt"))).iteration;
  } catch {
    return undefined;
  }
}

/** How long a second writer waits for the attempt's writer lock before it is refused (a holder that is exiting). */
const DEFAULT_WRITER_LOCK_WAIT_MS = 5000;

interface Remote {
  readonly primary: DirectPrimary;
  readonly lease: WriterLease | undefined;
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
  readonly worldSize: number;

  private readonly producer: string;
  private readonly listener: ((event: ManagerEvent) => void) | undefined;
  private readonly access: StoreAccess;
  private readonly uploadPrefix: string;
  private readonly remote: Remote | undefined;
  private readonly writerLock: WriterLock | undefined;
  private readonly watch: TerminationWatch;
  private readonly slots = new WriteSlots();
  private readonly coverage = new Map<number, StepCoverage>();
  private readonly open = new Map<number, SaveSession>();
  private nextSession = 1;
  private finalized = false;

  private constructor(init: {
    options: OpenOptions;
    attempt: AttemptDecision;
    checkpointsRoot: string;
    uploadPrefix: string;
    remote: Remote | undefined;
    writerLock: WriterLock | undefined;
    access: StoreAccess;
  }) {
    const { options } = init;
    this.config = options.config;
    this.attempt = init.attempt;
    this.attemptDir = init.attempt.attemptDir;
    this.runTs = init.attempt.runTs;
    this.checkpointsRoot = init.checkpointsRoot;
    this.rank = options.rank ?? 0;
    this.worldSize = options.worldSize ?? 1;
    this.producer = options.producer ?? DEFAULT_PRODUCER;
    this.listener = options.onEvent;
    this.access = init.access;
    this.uploadPrefix = init.uploadPrefix;
    this.remote = init.remote;
    this.writerLock = init.writerLock;
    this.watch = new TerminationWatch(
      sentinelPathFor(options.termination, process.env),
      options.termination?.signals ?? true,
      (reason) => this.emit({ type: "stop_requested", reason }),
    );
  }

  /**
   * Resolves the run attempt (a given RUN_TS, the legacy flat layout, a sibling for
   * `resume=off`, else the newest attempt, minting one at the first launch), creates it on rank 0,
   * acquires the writer lease of a direct object-store primary, and starts the termination watch.
   */
  static async open(options: OpenOptions): Promise<CheckpointManager> {
    const { config } = options;
    const rank = options.rank ?? 0;
    if (!Number.isSafeInteger(rank) || rank < 0) {
      throw new ManagerError(
        "MANAGER_BAD_ARGUMENT",
        `open checkpoint manager: rank ${String(rank)} is not an integer >= 0.`,
        { kind: "input" },
      );
    }
    const clock = options.clock ?? (() => new Date());
    const outputRoot = resolve(options.outputRoot);
    const run = { project: options.project, group: options.group, name: options.name };
    const nameDir = join(outputRoot, run.project, run.group, run.name);
    const attempt = decideAttempt({
      outputRoot,
      ...run,
      configRunTs: config.run_ts,
      ...(options.runTs === undefined ? {} : { givenRunTs: options.runTs }),
      resume: config.resume,
      rank,
      existingRunTs: await runTsDirs(nameDir),
      legacyFlat: (await entryKind(join(nameDir, CHECKPOINTS_DIR))) === "dir",
      now: clock(),
    });
    if (attempt.layout === "legacy" && config.resume === "off") {
      const root = join(attempt.attemptDir, CHECKPOINTS_DIR);
      refuseLegacyFresh(attempt, config.resume, {
        latest: await latestIteration(root),
        iterDirs: (await readdir(root)).filter((n) => parseIterDir(n) !== undefined),
      });
    }
    // A direct primary's writer guard is its lease on the store; the local lock guards a local attempt.
    const writerLock =
      rank === 0
        ? await CheckpointManager.claimAttempt(attempt, options, config.checkpoint_store.backend === "local")
        : undefined;
    try {
      return await CheckpointManager.openClaimed(options, attempt, run, writerLock);
    } catch (error) {
      await writerLock?.release();
      throw error;
    }
  }

  /** Rank 0: creates the attempt directory and (local primary) takes its writer lock. */
  private static async claimAttempt(
    attempt: AttemptDecision,
    options: OpenOptions,
    lock: boolean,
  ): Promise<WriterLock | undefined> {
    try {
      await mkdir(attempt.attemptDir, { recursive: true });
    } catch (error) {
      throw new ManagerError(
        "MANAGER_LAYOUT_FAILED",
        `create run attempt ${attempt.attemptDir}: ${messageOf(error)}`,
        {
          kind: "failed",
          subject: attempt.attemptDir,
          cause: error,
        },
      );
    }
    if (!lock) return undefined;
    return WriterLock.acquire(
      attempt.attemptDir,
      attempt.runTs,
      options.writerLockWaitMs ?? DEFAULT_WRITER_LOCK_WAIT_MS,
    );
  }

  private static async openClaimed(
    options: OpenOptions,
    attempt: AttemptDecision,
    run: { project: string; group: string; name: string },
    writerLock: WriterLock | undefined,
  ): Promise<CheckpointManager> {
    const { config } = options;
    const rank = options.rank ?? 0;
    const clock = options.clock ?? (() => new Date());
    const credentials =
      options.credentials ??
      (config.checkpoint_store.backend === "object_store"
        ? config.checkpoint_store.credentials
        : config.upload.credentials);
    const access: StoreAccess = {
      ...(credentials === "" || credentials === undefined ? {} : { credentials }),
      ...(options.storeTimeoutMs === undefined ? {} : { timeoutMs: options.storeTimeoutMs }),
    };
    const defaultPrefix = defaultPrefixFor(attempt, run);
    let remote: Remote | undefined;
    let checkpointsRoot = join(attempt.attemptDir, CHECKPOINTS_DIR);
    if (config.checkpoint_store.backend === "object_store") {
      const prefix = (config.checkpoint_store.prefix || defaultPrefix).replace(/\/+$/, "");
      const bucket = bucketUri(config.checkpoint_store.bucket);
      const root = await openAt(joinUri(bucket, prefix), access);
      const isCheckpointsRoot = prefix === CHECKPOINTS_DIR || prefix.endsWith(`/${CHECKPOINTS_DIR}`);
      const artifacts: ObjectStore | undefined = isCheckpointsRoot
        ? await openAt(
            joinUri(
              bucket,
              `${prefix.slice(0, prefix.length - CHECKPOINTS_DIR.length)}${CHECKPOINT_ARTIFACTS_DIR}`,
            ),
            access,
          )
        : undefined;
      const primary = new DirectPrimary(
        root,
        artifacts,
        join(attempt.attemptDir, STAGING_DIR),
        join(attempt.attemptDir, RESUME_CACHE_DIR),
        clock,
      );
      let lease: WriterLease | undefined;
      if (rank === 0) {
        const emit = (action: "acquired" | "renewed" | "released" | "lost", key: string) => {
          try {
            options.onEvent?.({ type: "lease", action, key });
          } catch {
            // A listener's failure never breaks the lease.
          }
        };
        lease = await WriterLease.acquire(
          root,
          WriterLease.newHolder(attempt.runTs),
          config.checkpoint_store.lease_seconds * 1000,
          clock,
          emit,
        );
        lease.startRenewing();
      }
      remote = { primary, lease };
      checkpointsRoot = root.uri;
    }
    const manager = new CheckpointManager({
      options,
      attempt,
      checkpointsRoot,
      uploadPrefix: (config.upload.prefix || defaultPrefix).replace(/\/+$/, ""),
      remote,
      writerLock,
      access,
    });
    manager.emit({ type: "attempt", attempt });
    for (const message of configWarnings(config)) manager.emit({ type: "warning", message });
    if (remote === undefined) await manager.loadArtifactCoverage();
    return manager;
  }

  private emit(event: ManagerEvent): void {
    try {
      this.listener?.(event);
    } catch {
      // A listener's failure never breaks a save.
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

  /** Artifacts already committed in this attempt count toward their step's coverage. */
  private async loadArtifactCoverage(): Promise<void> {
    for (const { iteration, dir } of await listCommittedArtifacts(this.attemptDir)) {
      try {
        const manifest = ARTIFACT_MANIFEST.parse(await readFile(join(dir, ARTIFACT_MANIFEST.fileName)));
        this.cover(iteration, "artifact", manifest.logical_components);
      } catch {
        // An unreadable manifest covers nothing; saving that step is refused as already committed.
      }
    }
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
    const remote = this.remote;
    const newestArtifact = remote
      ? await remote.primary.newestArtifact()
      : (await listCommittedArtifacts(this.attemptDir)).at(-1);
    let pointer: PointerState = { state: "absent" };
    if (resume === "auto")
      pointer = remote ? await remote.primary.readPointer() : await readLocalPointer(this.checkpointsRoot);
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
      ...(this.remote === undefined
        ? {}
        : { remote: { checkpointsUri: this.checkpointsRoot, stagingDir: this.remote.primary.stagingDir } }),
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
    this.writerLock?.assertHeld(`begin save at step ${step}`);
    if (plan.escalated) {
      this.emit({
        type: "warning",
        message:
          `emergency save at step ${step}: the step's committed artifact does not cover the run plan plus model and is never ` +
          "re-committed, so the full plan is written instead.",
      });
    }
    const { dir, targets, roles } = this.targetsFor(step, plan);
    let alreadyCommitted = false;
    if (this.remote !== undefined) {
      if (plan.kind === "full") alreadyCommitted = (await this.remote.primary.committed(step)) !== undefined;
      if (this.rank === 0) {
        const staged = this.remote.primary.stagedDir(plan.kind, step);
        await removeOwned(staged);
        await mkdir(staged, { recursive: true });
      }
    } else if (this.rank === 0) {
      await this.prepareLocal(dir, step, plan);
    }
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

  private async prepareLocal(dir: string, step: number, plan: SavePlan): Promise<void> {
    const kind = await entryKind(dir);
    if (plan.kind === "full" && kind !== "absent") {
      // The pointer is the commit of a local full checkpoint: at or behind it is committed history.
      const latest = await latestIteration(this.checkpointsRoot);
      if (latest !== undefined && latest >= step) {
        throw new ManagerError(
          "MANAGER_CHECKPOINT_EXISTS",
          `save ${dir}: it holds a committed checkpoint of step ${step}; a full checkpoint is never rewritten. ` +
            (this.attempt.layout === "legacy"
              ? "This happens when training resumed behind newer checkpoints of this legacy flat layout: resume from the latest one (resume=auto), or set run_ts for a fresh attempt beside it."
              : "This happens when training resumed behind newer checkpoints of the same attempt: resume from the latest one, or set resume=off for a fresh attempt."),
          { kind: "refused", subject: dir },
        );
      }
      // Past the pointer is what an interrupted save of this attempt left (even with its description written).
      await removeOwned(dir);
      this.emit({ type: "leftover_cleared", path: dir });
    } else if (plan.kind === "artifact" && kind !== "absent") {
      if ((await entryKind(join(dir, ARTIFACT_MANIFEST.fileName))) !== "absent") {
        throw new ManagerError(
          "MANAGER_ARTIFACT_COMMITTED",
          `save ${dir}: it is a committed artifact of step ${step}; a committed artifact is never committed again. ` +
            "Save the step's remaining components as a full checkpoint, or start a fresh attempt (resume=off).",
          { kind: "refused", subject: join(dir, ARTIFACT_MANIFEST.fileName) },
        );
      }
      // Only the component payloads an interrupted save of this step wrote; other files are not ours.
      for (const name of PHYSICAL_COMPONENTS) {
        for (const form of ["file", "dir"] as const) {
          const path = join(dir, physicalComponentPath(name, form));
          if (await removeOwned(path)) this.emit({ type: "leftover_cleared", path });
        }
      }
    }
    await mkdir(dir, { recursive: true });
    for (const role of this.config.roles) await mkdir(join(dir, role), { recursive: true });
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
      this.writerLock?.assertHeld(`commit save of step ${session.step}`);
      if (options.written !== undefined) {
        try {
          await options.written;
        } catch (error) {
          throw new ManagerError(
            "MANAGER_COMMIT_FAILED",
            `save step ${session.step}: the trainer's write failed (${messageOf(error)}); nothing was committed.`,
            { kind: "failed", subject: session.dir, cause: error },
          );
        }
      }
      return this.remote === undefined
        ? this.commitLocal(session, options)
        : this.commitRemote(session, this.remote);
    };
    if (this.remote === undefined && this.config.save_async) {
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

  private async commitLocal(session: SaveSession, options: CommitOptions): Promise<CommitReport> {
    const { plan, step, dir } = session;
    const format = this.config.checkpoint_format;
    if (plan.kind === "artifact") {
      const record = await commitArtifactLocal(dir, step, format, plan.components, this.producer);
      this.cover(step, "artifact", plan.components);
      const upload = this.config.upload.enabled
        ? await this.announceUpload(
            step,
            await archiveArtifact(
              dir,
              archiveUri(this.config.upload, this.uploadPrefix, "artifact", step),
              this.access,
            ),
          )
        : DISABLED;
      return this.report(session, record, false, "none", upload, undefined);
    }
    const pending = plan.validation === "pending";
    const record = await commitFullLocal({
      iterDir: dir,
      iteration: step,
      format,
      producer: this.producer,
      pending,
      ...(this.config.roles.length > 0
        ? {
            roles: {
              names: this.config.roles,
              commits: options.roles!,
              ...(options.loopState === undefined ? {} : { loopState: options.loopState }),
            },
          }
        : {}),
    });
    const pointer = await writeLatestPointer(this.checkpointsRoot, step);
    this.cover(step, "full", plan.components);
    this.emit({ type: "pointer", iteration: step, path: pointer });
    if (pending) {
      this.emit({ type: "validation", iteration: step, state: "evaluation_pending" });
      // Not archived or retained until validation succeeds and is published.
      return this.report(
        session,
        record,
        true,
        "evaluation_pending",
        this.config.upload.enabled ? { status: "deferred" } : DISABLED,
        undefined,
      );
    }
    // Archive first, then retention (which is upload-gated), in this save's write job.
    const upload = await this.archive(step, dir, false);
    const retention = await this.retain();
    return this.report(session, record, true, "none", upload, retention);
  }

  /** Archive upload of a full checkpoint: best-effort, or strict on a validation publication. */
  private async archive(step: number, dir: string, strict: boolean): Promise<UploadOutcome> {
    let upload = DISABLED;
    if (this.config.upload.enabled) {
      upload = await this.announceUpload(
        step,
        await archiveFullCheckpoint(
          dir,
          archiveUri(this.config.upload, this.uploadPrefix, "full", step),
          this.access,
        ),
      );
      if (strict && upload.status === "failed") {
        throw new ManagerError(
          "MANAGER_PUBLICATION_FAILED",
          `publish validated checkpoint ${dir}: the upload to ${upload.uri} failed (${upload.error?.message}). ` +
            "The checkpoint stays publication-pending; a resume retries the publication without re-running validation.",
          { kind: "failed", subject: dir },
        );
      }
    }
    return upload;
  }

  private async retain(): Promise<CommitReport["retention"]> {
    const retention = await applyLocalRetention(this.checkpointsRoot, this.config);
    if (retention !== undefined) this.emit({ type: "retention", outcome: retention });
    return retention;
  }

  private async announceUpload(iteration: number, outcome: UploadOutcome): Promise<UploadOutcome> {
    if (outcome.status === "uploaded") this.emit({ type: "uploaded", iteration, uri: outcome.uri! });
    else if (outcome.status === "failed") {
      this.emit({
        type: "upload_failed",
        iteration,
        code: outcome.error?.code ?? "UPLOAD_FAILED",
        message: outcome.error?.message ?? "",
      });
    }
    return outcome;
  }

  private async commitRemote(session: SaveSession, remote: Remote): Promise<CommitReport> {
    const { plan, step } = session;
    if (plan.kind === "artifact") {
      const done = await remote.primary.commitArtifact(step, plan.components, this.producer, remote.lease);
      this.cover(step, "artifact", plan.components);
      return this.report(
        session,
        { path: `${done.uri}/${ARTIFACT_MANIFEST.fileName}`, sha256: done.manifestSha256, bytes: 0 },
        false,
        "none",
        DISABLED,
        undefined,
      );
    }
    const pending = plan.validation === "pending" && !session.alreadyCommitted;
    const done = session.alreadyCommitted
      ? await remote.primary.confirm(step, remote.lease)
      : await remote.primary.commitFull(step, pending, remote.lease);
    this.cover(step, "full", plan.components);
    this.emit({ type: "pointer", iteration: step, path: `${this.checkpointsRoot}/latest_checkpoint.txt` });
    if (pending) this.emit({ type: "validation", iteration: step, state: "evaluation_pending" });
    return this.report(
      session,
      { path: `${done.uri}/.posttrain-manifest.json`, sha256: done.manifestSha256, bytes: 0 },
      true,
      pending ? "evaluation_pending" : "none",
      DISABLED,
      undefined,
    );
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
    if (this.remote !== undefined) return this.completeRemoteValidation(iteration, this.remote);
    this.writerLock?.assertHeld(`complete validation of iteration ${iteration}`);
    const dir = join(this.checkpointsRoot, formatIterDir(iteration));
    const path = join(dir, VALIDATION_STATE_FILE);
    let state: ValidationState;
    try {
      state = (await validationRecord.read(path)).state;
    } catch (error) {
      throw new ManagerError(
        "MANAGER_VALIDATION_STATE",
        `complete validation of ${dir}: no readable validation transaction (${messageOf(error)}). Only a full checkpoint saved with validation pending has one.`,
        { kind: "refused", subject: path, cause: error },
      );
    }
    if (state === "published") return { iteration, state, upload: DISABLED };
    if (state === "evaluation_pending") await this.advanceValidation(dir, iteration, "publication_pending");
    const upload = await this.archive(iteration, dir, true);
    await this.advanceValidation(dir, iteration, "published");
    // Retention counts the checkpoint once it is published, so it runs last.
    const retention = await this.retain();
    return { iteration, state: "published", upload, ...(retention === undefined ? {} : { retention }) };
  }

  private async advanceValidation(dir: string, iteration: number, state: ValidationState): Promise<void> {
    await writeValidationState(dir, iteration, state);
    this.emit({ type: "validation", iteration, state });
  }

  private async completeRemoteValidation(iteration: number, remote: Remote): Promise<PublicationReport> {
    const committed = await remote.primary.committed(iteration);
    const probed =
      committed === undefined
        ? undefined
        : await probeRemote(remote.primary.root, formatIterDir(iteration), remote.primary.cacheDir);
    const state = probed?.validation;
    if (state === undefined) {
      throw new ManagerError(
        "MANAGER_VALIDATION_STATE",
        `complete validation of ${this.checkpointsRoot}/${formatIterDir(iteration)}: it has no validation transaction.`,
        { kind: "refused", subject: `${this.checkpointsRoot}/${formatIterDir(iteration)}` },
      );
    }
    if (state === "evaluation_pending") {
      await remote.primary.writeValidation(iteration, "publication_pending", remote.lease);
      this.emit({ type: "validation", iteration, state: "publication_pending" });
    }
    if (state !== "published") {
      await remote.primary.writeValidation(iteration, "published", remote.lease);
      this.emit({ type: "validation", iteration, state: "published" });
    }
    return { iteration, state: "published", upload: DISABLED };
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
      await this.writerLock?.release();
      await this.remote?.lease
        ?.release()
        .catch((error: unknown) => this.emit({ type: "warning", message: messageOf(error) }));
    }
  }
}
