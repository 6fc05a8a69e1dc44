import type { CheckpointFormat, LoopStateValue } from "@ckpt/manifest";
import type { StoreCredentials } from "@ckpt/object-store";
import type { ManagerConfig } from "./config.js";
import type { ErrorKind, ManagerErrorCode } from "./errors.js";
import type { AttemptDecision, ComponentTargets } from "./layout.js";
import type { SavePlan } from "./plan.js";

/** Where a full checkpoint stands in the durable validation transaction. */
export type ValidationState = "evaluation_pending" | "publication_pending" | "published";

/** Why the training loop should stop at this step boundary. */
export type StopReason =
  | { readonly kind: "sentinel"; readonly path: string }
  | { readonly kind: "signal"; readonly signal: "SIGUSR1" | "SIGTERM" };

export interface TerminationOptions {
  /**
   * The sentinel file a batch script's USR1 trap touches. Default `$SLURM_LOG_DIR/SIGUSR1_RECEIVED`
   * when SLURM_LOG_DIR is set; null disables it. A sentinel already present when the manager opens
   * counts only once it is touched again (a previous window's leftover does not stop this one).
   */
  readonly sentinelPath?: string | null;
  /** Install flag-only SIGUSR1/SIGTERM handlers (default true); `finalize` removes them. */
  readonly signals?: boolean;
}

export interface OpenOptions {
  readonly config: ManagerConfig;
  /** The output root (`IMAGINAIRE_OUTPUT_ROOT`): run attempts live below it. */
  readonly outputRoot: string;
  readonly project: string;
  readonly group: string;
  readonly name: string;
  /** A RUN_TS resolved elsewhere (broadcast from rank 0, pinned for a Ray worker). */
  readonly runTs?: string;
  /** This process's rank (default 0). Only rank 0 mints attempts, commits, uploads and prunes. */
  readonly rank?: number;
  readonly worldSize?: number;
  /**
   * Credentials for the archive upload or the direct object-store primary (whichever the config
   * uses): the seeds' JSON object, or the path of its file. Default: the config's `credentials` path.
   */
  readonly credentials?: StoreCredentials | string;
  readonly onEvent?: (event: ManagerEvent) => void;
  /** Injectable clock (RUN_TS minting, lease expiry). Default `() => new Date()`. */
  readonly clock?: () => Date;
  readonly termination?: TerminationOptions;
  /** Recorded as `producer` in the manifests this manager writes (default `ckpt-trainer-checkpoint-manager/<version>`). */
  readonly producer?: string;
  /** Per-attempt timeout of object-store calls in milliseconds. */
  /**
   * Rank 0 holds the attempt's writer lock (`.ckpt-writer.lock`) for the manager's life; a second
   * writer waits this long for a live holder to finish before MANAGER_WRITER_LOCKED (default 5000).
   */
  readonly writerLockWaitMs?: number;
  readonly storeTimeoutMs?: number;
}

/** Physical component paths of a resume source; under a direct primary, DCP components are URIs. */
export type ResumeComponents = ComponentTargets;

export interface ResumeFresh {
  readonly kind: "fresh";
  readonly attemptDir: string;
  readonly reason: string;
}

/** Where a checkpoint is and what it holds: shared by a probe's finding and a resume decision. */
export interface CheckpointLocation {
  /** The iteration directory (a URI for a direct primary), or the legacy file itself. */
  readonly iterDir: string;
  /** The iteration; undefined only for a legacy checkpoint that names none. */
  readonly iteration: number | undefined;
  /** `legacy_file`: a single-file checkpoint (net, ref, ema and optimizer in one `.pt`), see `legacyFile`. */
  readonly format: CheckpointFormat | "legacy_file";
  /** Where each component is (files, DCP directories ending in `/`, or URIs for remote DCP components). */
  readonly components: ResumeComponents;
  /** The single-file legacy checkpoint. */
  readonly legacyFile?: string;
  /** A multi-role boundary: each role's components and the optimizer counter it committed. */
  readonly roles?: Readonly<
    Record<string, { readonly components: ResumeComponents; readonly optimizerStep: number }>
  >;
  /** The opaque `loop_state` of a multi-role boundary, exactly as committed. */
  readonly loopState?: Readonly<Record<string, LoopStateValue>>;
  /** SHA-256 of the checkpoint's manifest (description, control manifest, `_SUCCESS`, or the legacy file). */
  readonly manifestSha256?: string;
}

export interface ResumeCheckpoint extends CheckpointLocation {
  readonly kind: "checkpoint";
  /** `auto`: the latest complete checkpoint of this attempt; `explicit`: the configured `resume` path. */
  readonly source: "auto" | "explicit";
  /** The checkpoint is in the validation transaction: re-run validation, or only retry its publication. */
  readonly validation?: Exclude<ValidationState, "published">;
  readonly reason: string;
}

/** What `resolveResume` decided. */
export type ResumeDecision = ResumeFresh | ResumeCheckpoint;

/** One save between `beginSave` and `commitSave`. */
export interface SaveSession {
  readonly id: number;
  readonly step: number;
  readonly plan: SavePlan;
  /** The iteration directory (a URI under a direct primary). */
  readonly dir: string;
  /** Where the trainer writes each component of a single-role save. */
  readonly targets: ComponentTargets;
  /** Per-role targets of a multi-role boundary. */
  readonly roles?: Readonly<Record<string, ComponentTargets>>;
  /**
   * Direct primary only: the iteration already holds a valid control manifest from an earlier try.
   * Write nothing; `commitSave` only confirms `latest_checkpoint.txt`.
   */
  readonly alreadyCommitted: boolean;
}

export interface CommitOptions {
  /**
   * The trainer's own background write of the component files (`save_async`, consolidated
   * format): the commit runs once it resolves. A rejection abandons the save (nothing is committed).
   */
  readonly written?: Promise<void>;
  /** Multi-role boundary: the optimizer counter each role committed. */
  readonly roles?: Readonly<Record<string, { readonly optimizerStep: number }>>;
  /** Multi-role boundary: the loop's opaque settings, recorded verbatim in `_SUCCESS`. */
  readonly loopState?: Readonly<Record<string, LoopStateValue>>;
  /**
   * What the writer computed as it wrote (a hashing DCP StorageWriter passes it through the
   * sidecar): paths relative to the save's directory (POSIX, e.g. "model/__0_0.distcp"), sizes and
   * SHA-256. The description records these digests instead of reading the files again; files not
   * listed are hashed by the manager. A path that is not safe and relative, not a regular file, or
   * listed with another size than it has is refused (`MANAGER_INVENTORY_INVALID`).
   */
  readonly inventory?: readonly { readonly path: string; readonly size: number; readonly sha256: string }[];
}

/** How the archive copy of a save went. */
export interface UploadOutcome {
  /** `deferred`: a validation-pending checkpoint is archived when it is published. */
  readonly status: "disabled" | "uploaded" | "failed" | "deferred";
  readonly uri?: string;
  readonly error?: { readonly code: string; readonly message: string };
}

export interface RetentionOutcome {
  /** What was removed, relative to the checkpoints root. */
  readonly removed: readonly string[];
  readonly freedBytes: number;
  readonly errors: readonly string[];
}

/** What a completed commit did. */
export interface CommitReport {
  readonly kind: "full" | "artifact";
  readonly iteration: number;
  readonly dir: string;
  /** The commit record: description, artifact manifest, control manifest or `_SUCCESS`. */
  readonly manifest: string;
  readonly manifestSha256: string;
  /** `latest_checkpoint.txt` now names this iteration. */
  readonly pointerAdvanced: boolean;
  readonly validation: ValidationState | "none";
  readonly upload: UploadOutcome;
  /** Retention run in this save's job (undefined when none applies). */
  readonly retention?: RetentionOutcome;
  /** Payload bytes described. */
  readonly bytes: number;
}

export type SaveOutcome =
  | { readonly status: "committed"; readonly report: CommitReport }
  /** `save_async`: the commit runs in the role's background slot; the next save or `finalize` joins it. */
  | { readonly status: "scheduled"; readonly completion: Promise<CommitReport> }
  /** Ranks other than 0 commit nothing; rank 0 commits after every rank wrote (a barrier). */
  | { readonly status: "not_rank_zero" };

/** What `completeValidation` did. */
export interface PublicationReport {
  readonly iteration: number;
  readonly state: ValidationState;
  readonly upload: UploadOutcome;
  readonly retention?: RetentionOutcome;
}

/** Progress and notices; libraries never print, the caller renders these. */
export type ManagerEvent =
  | { readonly type: "warning"; readonly message: string }
  | { readonly type: "attempt"; readonly attempt: AttemptDecision }
  | { readonly type: "resume"; readonly decision: ResumeDecision }
  | { readonly type: "leftover_cleared"; readonly path: string }
  | { readonly type: "committed"; readonly report: CommitReport }
  | { readonly type: "pointer"; readonly iteration: number; readonly path: string }
  | {
      readonly type: "upload_failed";
      readonly iteration: number;
      readonly code: string;
      readonly message: string;
    }
  | { readonly type: "uploaded"; readonly iteration: number; readonly uri: string }
  | { readonly type: "retention"; readonly outcome: RetentionOutcome }
  | { readonly type: "validation"; readonly iteration: number; readonly state: ValidationState }
  | { readonly type: "stop_requested"; readonly reason: StopReason }
  | {
      readonly type: "lease";
      readonly action: "acquired" | "renewed" | "released" | "lost";
      readonly key: string;
    }
  | {
      readonly type: "async_failed";
      readonly code: ManagerErrorCode | string;
      readonly kind: ErrorKind;
      readonly message: string;
    };
