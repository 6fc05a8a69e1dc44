import type { LogicalComponent } from "@ckpt/manifest";
import type { TargetOptions } from "./layout.js";
import type { CommitRecord } from "./local/commit.js";
import type { PointerState } from "./resume/decide.js";
import type {
  CommitOptions,
  RetentionOutcome,
  SaveSession,
  UploadOutcome,
  ValidationState,
} from "./types.js";

/** The outcome of a primary that does not archive (upload disabled, or a direct object-store primary). */
export const UPLOAD_DISABLED: UploadOutcome = { status: "disabled" };

/**
 * How an archive upload runs: `best_effort` after a commit, `strict` when publishing a validated
 * checkpoint (a failure throws), `deferred` while validation is pending (nothing is uploaded yet).
 */
export type ArchiveMode = "best_effort" | "strict" | "deferred";

/** A committed full checkpoint: its commit record, and the pointer that now names it. */
export interface FullCommit {
  readonly record: CommitRecord;
  /** Path or URI of the `latest_checkpoint.txt` that names the iteration. */
  readonly pointer: string;
  /** The commit opened a validation transaction (evaluation pending). */
  readonly pending: boolean;
}

/**
 * Where a manager's checkpoints live and how it commits into them: a local directory
 * (`LocalPrimary`) or a direct object-store prefix (`DirectPrimary`). The manager sequences plans,
 * write slots, coverage and events; everything that depends on the storage is behind this.
 */
export interface Primary {
  /** The checkpoints root: a local directory, or the store URI of a direct object-store primary. */
  readonly checkpointsRoot: string;
  /** What `targetsFor` needs beyond the attempt directory (a direct primary's URIs and staging). */
  readonly targetOptions: Pick<TargetOptions, "remote">;
  /** Whether `save_async` may run commits in the background (a direct primary commits before returning). */
  readonly commitsInBackground: boolean;

  /** Artifacts committed before this manager opened, counted toward their step's coverage. */
  artifactCoverage(): Promise<ReadonlyArray<{ iteration: number; components: readonly LogicalComponent[] }>>;
  /** The newest committed artifact: a cold restart behind it is refused. */
  newestArtifact(): Promise<{ iteration: number; dir: string } | undefined>;
  /** `latest_checkpoint.txt` and a probe of the iteration it names. */
  readPointer(): Promise<PointerState>;

  /** Throws when the writer guard (a local primary's writer lock) was lost. */
  assertHeld(what: string): void;
  /**
   * Readies the targets of a save (`writer`: this rank clears what an interrupted save left);
   * returns whether the iteration is already committed (only a confirmation remains).
   */
  prepareSave(save: Pick<SaveSession, "step" | "plan" | "dir">, writer: boolean): Promise<boolean>;
  commitArtifact(session: SaveSession, options: CommitOptions): Promise<CommitRecord>;
  commitFull(session: SaveSession, options: CommitOptions): Promise<FullCommit>;
  /** The archive upload of a committed iteration (never throws unless `strict`). */
  archive(kind: "full" | "artifact", iteration: number, mode: ArchiveMode): Promise<UploadOutcome>;
  /** Retention after a commit or a publication; undefined when it does not apply. */
  retain(): Promise<RetentionOutcome | undefined>;

  /** The validation state of a committed full checkpoint; refused when it has no transaction. */
  validationState(iteration: number): Promise<ValidationState>;
  writeValidation(iteration: number, state: ValidationState): Promise<void>;

  /** Releases the writer guard (lock or lease); the manager is done. */
  release(): Promise<void>;
}
