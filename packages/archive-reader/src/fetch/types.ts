import type { CheckpointFormat, Destination } from "@ckpt/manifest";

export interface FetchOptions {
  readonly signal?: AbortSignal;
  /** The URI as the user wrote it, recorded in `.staged.json` (default: `store.uri`). */
  readonly uri?: string;
  /** Files downloaded at once (default 4). */
  readonly concurrency?: number;
  /** Bytes between two `bytes` events of one file (default 8 MiB; 0 reports every chunk). */
  readonly progressBytes?: number;
  /**
   * A download broken mid-stream (the connection reset or stalled, or the body ended early) is
   * continued in place by a ranged GET from the bytes already in its `.part`, up to this many times
   * in a row without progress (default 5, with a growing pause); then the fetch fails and a rerun
   * resumes. 0 fails at the first break.
   */
  readonly resumeRetries?: number;
  /** Pause before the n-th consecutive resume (default: @ckpt/object-store's backoff, 200 ms doubling to 5 s, jittered). */
  readonly resumeDelayMs?: (attempt: number) => number;
}

export interface FetchedFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  /** `kept`: already staged and still matching; `resumed`: a `.part` was continued by a ranged GET. */
  readonly action: "downloaded" | "resumed" | "kept";
}

/** What a finished fetch staged. */
export interface FetchReport {
  /** `<dst>/iter_*`: the staged artifact directory. */
  readonly stagedDir: string;
  readonly uri: string;
  readonly destination: Destination;
  readonly iteration: number;
  readonly format: CheckpointFormat;
  readonly manifestSha256: string;
  /** null for a legacy archive without a declaration. */
  readonly declarationSha256: string | null;
  /** The staging was already complete for this source and every file still matched. */
  readonly upToDate: boolean;
  /** Files staged, the native manifest last. */
  readonly files: readonly FetchedFile[];
  /** Files of a previously staged other source that were removed (only those its record named). */
  readonly removed: readonly string[];
  /** Bytes transferred by this run. */
  readonly downloadedBytes: number;
  /** Downloads broken mid-stream and continued in place by a ranged GET during this run. */
  readonly resumedInPlace: number;
}

/** Progress of a fetch; the {@link FetchReport} is the operation's return value. */
export type FetchEvent =
  | {
      readonly type: "remote";
      readonly uri: string;
      readonly iteration: number;
      readonly format: CheckpointFormat;
      readonly declared: boolean;
      readonly files: number;
      readonly bytes: number;
    }
  | {
      readonly type: "plan";
      readonly stagedDir: string;
      readonly keep: number;
      readonly download: number;
      readonly remove: readonly string[];
      /** Bytes this run will transfer (resumed prefixes excluded). */
      readonly bytes: number;
      readonly upToDate: boolean;
    }
  | { readonly type: "file-start"; readonly path: string; readonly size: number; readonly resumeFrom: number }
  | {
      /** A download broke mid-stream; it continues from `from` by a ranged GET after a pause. */
      readonly type: "resume";
      readonly path: string;
      readonly from: number;
      /** Consecutive breaks without progress so far (1-based). */
      readonly attempt: number;
      readonly reason: string;
    }
  | {
      readonly type: "bytes";
      readonly path: string;
      /** Bytes since the previous event of this file. */
      readonly bytes: number;
      /** Bytes transferred by this run so far, over all files. */
      readonly doneBytes: number;
      readonly totalBytes: number;
    }
  | { readonly type: "file-done"; readonly path: string; readonly size: number; readonly sha256: string }
  | { readonly type: "dcp-check"; readonly path: string };
