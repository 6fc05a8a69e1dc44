/** Progress of a prefix transfer: one event per object, skipped or transferred. */
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

/** Drain a transfer's events into its report. */
export async function drainTransfer(events: AsyncIterable<TransferEvent>): Promise<TransferReport> {
  const transferred: Array<{ key: string; size: number }> = [];
  const skipped: Array<{ key: string; size: number }> = [];
  let bytes = 0;
  for await (const event of events) {
    if (event.type === "done") {
      transferred.push({ key: event.key, size: event.size });
      bytes += event.size;
    } else if (event.type === "skip") {
      skipped.push({ key: event.key, size: event.size });
    }
  }
  return { transferred, skipped, bytes };
}

/** A listing prefix that names a directory: "" stays "", anything else ends with "/". */
export function directoryPrefix(prefix: string): string {
  return prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
}
