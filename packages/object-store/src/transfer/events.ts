/**
 * Progress of a prefix transfer: one event per object, skipped or transferred (`done`: that
 * object is in place). The transfer's {@link TransferReport} is the generator's return value.
 */
export type TransferEvent =
  | {
      readonly type: "skip";
      readonly key: string;
      readonly size: number;
      readonly reason: "same-size" | "same-digest";
    }
  | {
      readonly type: "done";
      readonly key: string;
      readonly size: number;
      readonly sha256?: string;
      /** A same-size copy was already there with another digest: it was overwritten. */
      readonly replaced?: true;
    };

/** What a finished transfer did. */
export interface TransferReport {
  readonly transferred: ReadonlyArray<{ readonly key: string; readonly size: number }>;
  readonly skipped: ReadonlyArray<{ readonly key: string; readonly size: number }>;
  /** Transferred over a same-size copy whose digest differed (also listed in `transferred`). */
  readonly replaced: ReadonlyArray<{ readonly key: string; readonly size: number }>;
  /** Bytes moved (skipped objects not counted). */
  readonly bytes: number;
}

export interface TransferOptions {
  readonly signal?: AbortSignal;
  /** Passed to the destination's put (copy only). */
  readonly multipartThreshold?: number;
  readonly partSize?: number;
  readonly concurrency?: number;
}

/** A transfer's report as it runs: each object is added once, skipped or transferred. */
export class TransferTally {
  private readonly transferred: Array<{ key: string; size: number }> = [];
  private readonly skipped: Array<{ key: string; size: number }> = [];
  private readonly replaced: Array<{ key: string; size: number }> = [];
  private bytes = 0;

  skip(event: Extract<TransferEvent, { type: "skip" }>): TransferEvent {
    this.skipped.push({ key: event.key, size: event.size });
    return event;
  }

  transfer(event: Extract<TransferEvent, { type: "done" }>): TransferEvent {
    this.transferred.push({ key: event.key, size: event.size });
    if (event.replaced) this.replaced.push({ key: event.key, size: event.size });
    this.bytes += event.size;
    return event;
  }

  report(): TransferReport {
    return {
      transferred: this.transferred,
      skipped: this.skipped,
      replaced: this.replaced,
      bytes: this.bytes,
    };
  }
}

/** A listing prefix that names a directory: "" stays "", anything else ends with "/". */
export function directoryPrefix(prefix: string): string {
  return prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
}

/**
 * Whether an object may be skipped because a copy is already at the target: same size, and the
 * same digest whenever both digests are known; a same-size copy with another digest is replaced.
 * Without a digest on either side the size is all there is to compare. Pure.
 */
export function existingCopy(
  source: { readonly size: number; readonly sha256?: string | undefined },
  existing: { readonly size: number; readonly sha256?: string | undefined } | undefined,
): "absent" | "same-size" | "same-digest" | "replace" {
  if (existing === undefined || existing.size !== source.size) return "absent";
  if (source.sha256 === undefined || existing.sha256 === undefined) return "same-size";
  return source.sha256 === existing.sha256 ? "same-digest" : "replace";
}
