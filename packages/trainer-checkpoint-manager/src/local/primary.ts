import { readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  CHECKPOINT_ARTIFACTS_DIR,
  formatIterDir,
  type LogicalComponent,
} from "@ckpt/manifest";
import { applyLocalRetention, archiveArtifact, archiveFullCheckpoint, archiveUri } from "../archive.js";
import type { ManagerConfig } from "../config.js";
import { ManagerError, messageOf } from "../errors.js";
import type { StoreAccess } from "../internal/store.js";
import type { AttemptDecision } from "../layout.js";
import { type ArchiveMode, type FullCommit, type Primary, UPLOAD_DISABLED } from "../primary.js";
import { VALIDATION_STATE_FILE, validationRecord } from "../records.js";
import { listCommittedArtifacts, readLocalPointer } from "../resume/local.js";
import type {
  CommitOptions,
  ManagerEvent,
  RetentionOutcome,
  SaveSession,
  UploadOutcome,
  ValidationState,
} from "../types.js";
import {
  commitArtifactLocal,
  commitFullLocal,
  type CommitRecord,
  writeLatestPointer,
  writeValidationState,
} from "./commit.js";
import { prepareLocalSave } from "./prepare.js";
import type { WriterLock } from "./writer-lock.js";

export interface LocalPrimaryInit {
  readonly attempt: AttemptDecision;
  readonly checkpointsRoot: string;
  readonly config: ManagerConfig;
  readonly producer: string;
  /** The archive prefix below the upload bucket. */
  readonly uploadPrefix: string;
  readonly access: StoreAccess;
  /** Rank 0's lock on the attempt; other ranks hold none. */
  readonly writerLock: WriterLock | undefined;
  readonly emit: (event: ManagerEvent) => void;
}

/**
 * A local primary: checkpoints in `<attempt>/checkpoints`, artifacts in
 * `<attempt>/checkpoint_artifacts`, committed by records on disk and `latest_checkpoint.txt`,
 * archived to the upload bucket and retained afterwards, guarded by the attempt's writer lock.
 */
export class LocalPrimary implements Primary {
  readonly checkpointsRoot: string;
  readonly targetOptions = {};
  readonly commitsInBackground = true;

  constructor(private readonly init: LocalPrimaryInit) {
    this.checkpointsRoot = init.checkpointsRoot;
  }

  private iterationDir(kind: "full" | "artifact", iteration: number): string {
    return kind === "full"
      ? join(this.checkpointsRoot, formatIterDir(iteration))
      : join(this.init.attempt.attemptDir, CHECKPOINT_ARTIFACTS_DIR, formatIterDir(iteration));
  }

  async artifactCoverage(): Promise<Array<{ iteration: number; components: readonly LogicalComponent[] }>> {
    const covered: Array<{ iteration: number; components: readonly LogicalComponent[] }> = [];
    for (const { iteration, dir } of await listCommittedArtifacts(this.init.attempt.attemptDir)) {
      try {
        const manifest = ARTIFACT_MANIFEST.parse(await readFile(join(dir, ARTIFACT_MANIFEST.fileName)));
        covered.push({ iteration, components: manifest.logical_components });
      } catch {
        // An unreadable manifest covers nothing; saving that step is refused as already committed.
      }
    }
    return covered;
  }

  async newestArtifact() {
    return (await listCommittedArtifacts(this.init.attempt.attemptDir)).at(-1);
  }

  readPointer() {
    return readLocalPointer(this.checkpointsRoot);
  }

  assertHeld(what: string): void {
    this.init.writerLock?.assertHeld(what);
  }

  async prepareSave(save: Pick<SaveSession, "step" | "plan" | "dir">, writer: boolean): Promise<boolean> {
    if (writer) {
      await prepareLocalSave(
        {
          kind: save.plan.kind,
          step: save.step,
          dir: save.dir,
          layout: this.init.attempt.layout,
          checkpointsRoot: this.checkpointsRoot,
          roles: this.init.config.roles,
        },
        (path) => this.init.emit({ type: "leftover_cleared", path }),
      );
    }
    return false;
  }

  commitArtifact(session: SaveSession): Promise<CommitRecord> {
    const { config, producer } = this.init;
    return commitArtifactLocal(
      session.dir,
      session.step,
      config.checkpoint_format,
      session.plan.components,
      producer,
    );
  }

  async commitFull(session: SaveSession, options: CommitOptions): Promise<FullCommit> {
    const { config, producer } = this.init;
    const pending = session.plan.validation === "pending";
    const record = await commitFullLocal({
      iterDir: session.dir,
      iteration: session.step,
      format: config.checkpoint_format,
      producer,
      pending,
      ...(options.inventory === undefined ? {} : { inventory: options.inventory }),
      ...(config.roles.length > 0
        ? {
            roles: {
              names: config.roles,
              commits: options.roles!,
              ...(options.loopState === undefined ? {} : { loopState: options.loopState }),
            },
          }
        : {}),
    });
    const pointer = await writeLatestPointer(this.checkpointsRoot, session.step);
    return { record, pointer, pending };
  }

  async archive(kind: "full" | "artifact", iteration: number, mode: ArchiveMode): Promise<UploadOutcome> {
    const { config, uploadPrefix, access } = this.init;
    if (!config.upload.enabled) return UPLOAD_DISABLED;
    // Not archived until validation succeeds and is published.
    if (mode === "deferred") return { status: "deferred" };
    const dir = this.iterationDir(kind, iteration);
    const uri = archiveUri(config.upload, uploadPrefix, kind, iteration);
    const upload = this.announce(
      iteration,
      kind === "full"
        ? await archiveFullCheckpoint(dir, uri, access, config.roles)
        : await archiveArtifact(dir, uri, access),
    );
    if (mode === "strict" && upload.status === "failed") {
      throw new ManagerError(
        "MANAGER_PUBLICATION_FAILED",
        `publish validated checkpoint ${dir}: the upload to ${upload.uri} failed (${upload.error?.message}). ` +
          "The checkpoint stays publication-pending; a resume retries the publication without re-running validation.",
        { kind: "failed", subject: dir },
      );
    }
    return upload;
  }

  private announce(iteration: number, outcome: UploadOutcome): UploadOutcome {
    if (outcome.status === "uploaded") this.init.emit({ type: "uploaded", iteration, uri: outcome.uri! });
    else if (outcome.status === "failed") {
      this.init.emit({
        type: "upload_failed",
        iteration,
        code: outcome.error?.code ?? "UPLOAD_FAILED",
        message: outcome.error?.message ?? "",
      });
    }
    return outcome;
  }

  async retain(): Promise<RetentionOutcome | undefined> {
    const retention = await applyLocalRetention(this.checkpointsRoot, this.init.config);
    if (retention !== undefined) this.init.emit({ type: "retention", outcome: retention });
    return retention;
  }

  async validationState(iteration: number): Promise<ValidationState> {
    const dir = this.iterationDir("full", iteration);
    const path = join(dir, VALIDATION_STATE_FILE);
    try {
      return (await validationRecord.read(path)).state;
    } catch (error) {
      throw new ManagerError(
        "MANAGER_VALIDATION_STATE",
        `complete validation of ${dir}: no readable validation transaction (${messageOf(error)}). Only a full checkpoint saved with validation pending has one.`,
        { kind: "refused", subject: path, cause: error },
      );
    }
  }

  writeValidation(iteration: number, state: ValidationState): Promise<void> {
    return writeValidationState(this.iterationDir("full", iteration), iteration, state);
  }

  async release(): Promise<void> {
    await this.init.writerLock?.release();
  }
}
