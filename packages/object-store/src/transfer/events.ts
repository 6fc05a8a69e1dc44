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
  | { readonly type: "done"; readonly key: string; readonly size: number; readonly sha256?: string };

/** What a finished transfer did. */
export interface TransferReport {
  readonly transferred: ReadonlyArray<{ readonly key: string; readonly size: number }>;
  readonly skipped: ReadonlyArray<{ readonly key: string; readonly size: number }>;
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
  private bytes = 0;

  skip(event: Extract<TransferEvent, { type: "skip" }>): TransferEvent {
    this.skipped.push({ key: event.key, size: event.size });
    return event;
  }

  transfer(event: Extract<TransferEvent, { type: "done" }>): TransferEvent {
    this.transferred.push({ key: event.key, size: event.size });
    this.bytes += event.size;
    return event;
  }

  report(): TransferReport {
    return { transferred: this.transferred, skipped: this.skipped, bytes: this.bytes };
  }
}

/** A listing prefix that names a directory: "" stays "", anything else ends with "/". */
export function directoryPrefix(prefix: string): string {
  return prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
}
