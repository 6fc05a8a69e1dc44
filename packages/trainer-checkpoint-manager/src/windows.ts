import { hostname } from "node:os";
import { join } from "node:path";
import { type RecordSchema, recordApi } from "@ckpt/manifest";
import { z } from "zod";
import { ManagerError, messageOf } from "./errors.js";

/** The log of the process windows that used a run attempt, in the attempt directory. */
export const WINDOWS_FILE = ".ckpt-windows.json";
export const WINDOWS_SCHEMA = "ckpt.attempt-windows.v1";
/** The newest windows kept: a job requeued every few minutes for months stays a small record. */
const MAX_WINDOWS = 1000;

const windowSchema = z.strictObject({
  host: z.string().max(255),
  pid: z.number().int().min(0),
  started_at: z.iso.datetime(),
  /** Set by a clean finalize; null while the window runs, and for ever after a kill. */
  ended_at: z.iso.datetime().nullable(),
});
export type AttemptWindow = z.infer<typeof windowSchema>;

const windowsSchema = z.strictObject({
  schema: z.literal(WINDOWS_SCHEMA),
  /** Oldest first. */
  windows: z.array(windowSchema).max(MAX_WINDOWS),
});
export type AttemptWindowsRecord = z.infer<typeof windowsSchema>;

export const WINDOWS_RECORD: RecordSchema<AttemptWindowsRecord> = {
  title: "run attempt windows",
  fileName: WINDOWS_FILE,
  versionField: "schema",
  versions: [WINDOWS_SCHEMA],
  schema: windowsSchema,
};
const windowsRecord = recordApi(WINDOWS_RECORD);

/** `previous` (none: a new log) with `window` appended, the oldest dropped past MAX_WINDOWS. Pure. */
export function withWindow(
  previous: AttemptWindowsRecord | undefined,
  window: AttemptWindow,
): AttemptWindowsRecord {
  const windows = [...(previous?.windows ?? []), window];
  return { schema: WINDOWS_SCHEMA, windows: windows.slice(-MAX_WINDOWS) };
}

/** `record` with its newest window ended at `endedAt`. Pure. */
export function withNewestEnded(record: AttemptWindowsRecord, endedAt: Date): AttemptWindowsRecord {
  const windows = [...record.windows];
  const newest = windows.at(-1);
  if (newest !== undefined) windows[windows.length - 1] = { ...newest, ended_at: endedAt.toISOString() };
  return { ...record, windows };
}

/**
 * The windows log of a run attempt; undefined when it has none (written by managers before it
 * existed, or by none). A record that does not validate is MANAGER_WINDOWS_INVALID.
 */
export async function readAttemptWindows(attemptDir: string): Promise<AttemptWindowsRecord | undefined> {
  const path = join(attemptDir, WINDOWS_FILE);
  try {
    return await windowsRecord.read(path);
  } catch (error) {
    if ((error as { code?: unknown }).code === "RECORD_NOT_FOUND") return undefined;
    throw new ManagerError(
      "MANAGER_WINDOWS_INVALID",
      `${messageOf(error).replace(/\.$/, "")}; the log of job windows is evidence only: remove it and the next start begins a new one.`,
      { kind: "refused", subject: path, cause: error },
    );
  }
}

/**
 * This process's window in the attempt's log, opened at start (rank 0, under the writer lock) and
 * ended by a clean finalize. The log is evidence, never a reason to stop training: a log that
 * cannot be read or written is a warning, and an unreadable one is replaced by a new log.
 */
export class AttemptWindowLog {
  private constructor(
    private readonly path: string,
    private record: AttemptWindowsRecord,
    private readonly warn: (message: string) => void,
  ) {}

  static async open(
    attemptDir: string,
    now: Date,
    warn: (message: string) => void,
  ): Promise<AttemptWindowLog> {
    const previous = await readAttemptWindows(attemptDir).catch((error: unknown) => {
      warn(`${messageOf(error)} A new log starts now.`);
      return undefined;
    });
    const record = withWindow(previous, {
      host: hostname(),
      pid: process.pid,
      started_at: now.toISOString(),
      ended_at: null,
    });
    const log = new AttemptWindowLog(join(attemptDir, WINDOWS_FILE), record, warn);
    await log.write();
    return log;
  }

  async end(now: Date): Promise<void> {
    this.record = withNewestEnded(this.record, now);
    await this.write();
  }

  private async write(): Promise<void> {
    await windowsRecord.write(this.path, this.record).catch((error: unknown) => {
      this.warn(`write ${this.path}: ${messageOf(error)}; the log of job windows misses this window`);
    });
  }
}
