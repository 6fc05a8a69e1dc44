import {
  CheckpointManager,
  type CommitReport,
  type ComponentTargets,
  cadenceDue,
  type ManagerEvent,
  parseManagerConfig,
  type ResumeDecision,
  type SaveSession,
  type StopReason,
} from "@ckpt/trainer-checkpoint-manager";
import { TrainerBindingError } from "./errors.js";
import type { RequestHandler } from "./protocol/connection.js";
import { negotiateVersion, OP_NAMES, type OpArgs, type Request } from "./protocol/messages.js";

/** One component on the wire: directories (the `dcp` format) are named without their trailing `/`. */
interface WireComponent {
  readonly name: string;
  readonly path: string;
  readonly kind: "file" | "directory";
}

/** The manager's targets (directories end in `/`) as wire components, in the manager's order. */
function wireComponents(targets: ComponentTargets): WireComponent[] {
  return Object.entries(targets).map(([name, path]) =>
    path.endsWith("/")
      ? { name, path: path.replace(/\/+$/, ""), kind: "directory" }
      : { name, path, kind: "file" },
  );
}

/** A resume decision as the trainer reads it. */
function wireResume(decision: ResumeDecision): Record<string, unknown> {
  if (decision.kind === "fresh") {
    return { kind: "fresh", reason: decision.reason, attempt_dir: decision.attemptDir };
  }
  return {
    kind: "checkpoint",
    source: decision.source,
    iter_dir: decision.iterDir,
    iteration: decision.iteration ?? null,
    format: decision.format,
    components: wireComponents(decision.components),
    manifest_sha256: decision.manifestSha256 ?? null,
    validation: decision.validation ?? null,
    reason: decision.reason,
    ...(decision.legacyFile === undefined ? {} : { legacy_file: decision.legacyFile }),
    ...(decision.roles === undefined
      ? {}
      : {
          roles: Object.fromEntries(
            Object.entries(decision.roles).map(([role, r]) => [
              role,
              { components: wireComponents(r.components), optimizer_step: r.optimizerStep },
            ]),
          ),
        }),
    ...(decision.loopState === undefined ? {} : { loop_state: decision.loopState }),
  };
}

function wireCommit(report: CommitReport): Record<string, unknown> {
  return {
    status: "committed",
    kind: report.kind,
    iteration: report.iteration,
    dir: report.dir,
    manifest: report.manifest,
    manifest_sha256: report.manifestSha256,
    pointer_advanced: report.pointerAdvanced,
    validation: report.validation,
    upload: report.upload,
    bytes: report.bytes,
  };
}

/** The stop decision: the manager's watch first, then the signals the trainer itself caught. */
function wireStop(
  watched: StopReason | undefined,
  trainerSignals: readonly string[],
): Record<string, unknown> {
  if (watched?.kind === "sentinel") {
    return {
      stop: true,
      reason: `sentinel ${watched.path}`,
      cause: { kind: "sentinel", path: watched.path },
    };
  }
  if (watched?.kind === "signal") {
    return {
      stop: true,
      reason: `signal ${watched.signal} (sidecar)`,
      cause: { kind: "signal", signal: watched.signal, where: "sidecar" },
    };
  }
  const signal = trainerSignals[0];
  if (signal !== undefined) {
    return {
      stop: true,
      reason: `signal ${signal} (trainer)`,
      cause: { kind: "signal", signal, where: "trainer" },
    };
  }
  return { stop: false, reason: null, cause: null };
}

/** One log line per manager event, for the sidecar's stderr. */
function describeEvent(event: ManagerEvent): string {
  switch (event.type) {
    case "warning":
      return `warning: ${event.message}`;
    case "attempt":
      return `attempt ${event.attempt.attemptDir} (${event.attempt.how})`;
    case "resume":
      return event.decision.kind === "fresh"
        ? `fresh start: ${event.decision.reason}`
        : `resume from ${event.decision.iterDir}: ${event.decision.reason}`;
    case "leftover_cleared":
      return `cleared an incomplete leftover ${event.path}`;
    case "committed":
      return `committed ${event.report.kind} iteration ${event.report.iteration} at ${event.report.dir}`;
    case "pointer":
      return `latest checkpoint -> iteration ${event.iteration} (${event.path})`;
    case "upload_failed":
      return `archive upload of iteration ${event.iteration} failed (${event.code}): ${event.message}`;
    case "uploaded":
      return `archived iteration ${event.iteration} to ${event.uri}`;
    case "retention":
      return `retention removed ${event.outcome.removed.length} item(s), ${event.outcome.freedBytes} bytes${event.outcome.errors.length > 0 ? `; errors: ${event.outcome.errors.join("; ")}` : ""}`;
    case "validation":
      return `validation of iteration ${event.iteration}: ${event.state}`;
    case "stop_requested":
      return `stop requested: ${event.reason.kind === "sentinel" ? `sentinel ${event.reason.path}` : `signal ${event.reason.signal}`}`;
    case "lease":
      return `writer lease ${event.action}: ${event.key}`;
    case "async_failed":
      return `background commit failed (${event.code}): ${event.message}`;
  }
}

export interface SessionOptions {
  /** Where log lines go (the sidecar's stderr). */
  readonly log: (line: string) => void;
  readonly serverVersion: string;
}

/**
 * The protocol adapter over one CheckpointManager: it checks the order of calls (hello, open,
 * then the rest), keeps the open saves by id and turns manager results into wire objects. Every
 * decision (attempt, resume, plan, targets, commit, stop) is the manager's.
 */
export class SidecarSession implements RequestHandler {
  private version: number | undefined;
  private manager: CheckpointManager | undefined;
  private finalized = false;
  private readonly saves = new Map<string, SaveSession>();

  constructor(private readonly options: SessionOptions) {}

  /** The session holds an open run attempt: opened and neither finalized nor abandoned. */
  get holdsAttempt(): boolean {
    return this.manager !== undefined && !this.finalized;
  }

  async handle(request: Request): Promise<{ result: unknown; end?: boolean }> {
    if (request.op === "hello") return { result: this.hello(request.args) };
    if (this.version === undefined) {
      throw new TrainerBindingError(
        "PROTOCOL_HELLO_REQUIRED",
        `${request.op} before hello: send hello first`,
        { kind: "input" },
      );
    }
    if (this.finalized) {
      throw new TrainerBindingError(
        "SESSION_FINALIZED",
        `${request.op} after finalize: the session has ended`,
        {
          kind: "refused",
        },
      );
    }
    if (request.op === "open") return { result: await this.open(request.args) };
    const manager = this.manager;
    if (manager === undefined) {
      throw new TrainerBindingError(
        "SESSION_NOT_OPEN",
        `${request.op} before open: open the run attempt first`,
        { kind: "input" },
      );
    }
    switch (request.op) {
      case "resume":
        return { result: wireResume(await manager.resolveResume()) };
      case "begin_save":
        return { result: await this.beginSave(manager, request.args) };
      case "commit":
        return { result: await this.commit(manager, request.args) };
      case "complete_validation": {
        const report = await manager.completeValidation(request.args.iteration);
        return { result: { iteration: report.iteration, state: report.state, upload: report.upload } };
      }
      case "should_stop":
        return { result: wireStop(manager.stopRequested(), request.args.signals) };
      case "finalize":
        this.finalized = true;
        this.saves.clear();
        await manager.finalize();
        return { result: { finalized: true }, end: true };
    }
  }

  async abandon(): Promise<void> {
    if (this.saves.size > 0) {
      this.options.log(
        `the trainer went away with ${this.saves.size} save(s) open; they are not committed (resume uses the last complete checkpoint)`,
      );
      this.saves.clear();
    }
    if (this.manager !== undefined && !this.finalized) {
      this.finalized = true;
      // Commits the trainer already asked for (save_async) still land; nothing else is done.
      await this.manager.finalize().catch((error: unknown) => {
        this.options.log(
          `finalize after disconnect failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      });
    }
  }

  private hello(args: OpArgs<"hello">): Record<string, unknown> {
    this.version = negotiateVersion(args.protocol);
    return {
      protocol: this.version,
      server: "ckpt-trainer",
      server_version: this.options.serverVersion,
      ops: OP_NAMES,
    };
  }

  private async open(args: OpArgs<"open">): Promise<Record<string, unknown>> {
    if (this.manager !== undefined) {
      throw new TrainerBindingError(
        "SESSION_ALREADY_OPEN",
        `open: this session already holds the attempt ${this.manager.attemptDir}; one session opens one attempt`,
        { kind: "refused" },
      );
    }
    const { config, warnings } = parseManagerConfig(args.config);
    const log = this.options.log;
    this.manager = await CheckpointManager.open({
      config,
      outputRoot: args.output_root,
      project: args.project,
      group: args.group,
      name: args.name,
      rank: args.rank,
      worldSize: args.world_size,
      ...(args.run_ts === undefined ? {} : { runTs: args.run_ts }),
      ...(args.credentials === undefined ? {} : { credentials: args.credentials }),
      onEvent: (event) => log(describeEvent(event)),
    });
    for (const warning of warnings) log(`warning: ${warning}`);
    return {
      attempt_dir: this.manager.attemptDir,
      run_ts: this.manager.runTs,
      checkpoints_dir: this.manager.checkpointsRoot,
      layout: this.manager.attempt.layout,
      how: this.manager.attempt.how,
      format: config.checkpoint_format,
      rank: args.rank,
      world_size: args.world_size,
      warnings,
    };
  }

  private async beginSave(
    manager: CheckpointManager,
    args: OpArgs<"begin_save">,
  ): Promise<Record<string, unknown>> {
    if (this.saves.size > 0) {
      const [open] = this.saves.values();
      throw new TrainerBindingError(
        "SAVE_IN_PROGRESS",
        `begin_save at step ${args.step}: the save of step ${open!.step} is still open; commit it first`,
        { kind: "refused" },
      );
    }
    // The loop may state its own cadence (its step axis can differ from iter_*); else save_every decides.
    const cadence = args.cadence ?? cadenceDue(manager.config, args.step);
    const due = { cadence, final: args.final, validation: args.validation, emergency: args.emergency };
    const plan = manager.planSave(args.step, due);
    if (plan === undefined) return { save: null, reason: `nothing to save at step ${args.step}` };
    const session = await manager.beginSave(args.step, plan);
    const id = String(session.id);
    this.saves.set(id, session);
    return {
      save: {
        id,
        step: session.step,
        kind: plan.kind,
        dir: session.dir,
        components: wireComponents(session.targets),
        reasons: plan.reasons,
        validation: plan.validation,
        already_committed: session.alreadyCommitted,
        ...(plan.escalated ? { escalated: true } : {}),
      },
    };
  }

  private async commit(manager: CheckpointManager, args: OpArgs<"commit">): Promise<Record<string, unknown>> {
    const session = this.saves.get(args.save_id);
    if (session === undefined) {
      throw new TrainerBindingError(
        "SAVE_UNKNOWN",
        `commit: no open save has id ${JSON.stringify(args.save_id)} (already committed, or begun in another session)`,
        { kind: "input" },
      );
    }
    // Whatever the outcome, this save is done: a failed commit is begun again with begin_save.
    this.saves.delete(args.save_id);
    const outcome = await manager.commitSave(
      session,
      args.inventory === undefined ? {} : { inventory: args.inventory },
    );
    if (outcome.status === "committed") return wireCommit(outcome.report);
    if (outcome.status === "scheduled") {
      // The manager reports a failure as an async_failed event and at the next join; the result is logged.
      outcome.completion.catch(() => {});
      return { status: "scheduled", step: session.step, dir: session.dir };
    }
    return { status: "not_rank_zero", step: session.step, dir: session.dir };
  }
}
