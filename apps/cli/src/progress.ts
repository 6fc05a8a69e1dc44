import { drain, type LongOperation } from "@ckpt/progress";
import type { CliIo } from "./io.js";
import { formatBytes } from "./render.js";

/** A progress display for long work. Drawn on stderr, on a terminal only; silent otherwise. */
export interface Progress {
  /** `done` and `total` in bytes (or items when `unit` is "items"). */
  update(done: number, total: number, detail?: string): void;
  /** Clears the line; call once the work ends (success or failure). */
  finish(): void;
}

const REDRAW_MS = 100; // a terminal cannot show more; avoids flooding slow ttys

export function createProgress(
  io: CliIo,
  label: string,
  options: { quiet?: boolean; unit?: "bytes" | "items" } = {},
): Progress {
  if (!io.interactive || options.quiet) return { update() {}, finish() {} };
  const unit = options.unit ?? "bytes";
  let lastDraw = 0;
  let drawn = false;
  const format = (n: number) => (unit === "bytes" ? formatBytes(n) : String(n));
  return {
    update(done, total, detail) {
      const now = Date.now();
      if (now - lastDraw < REDRAW_MS && done < total) return;
      lastDraw = now;
      const width = 24;
      const ratio = total > 0 ? Math.min(1, done / total) : 0;
      const filled = Math.round(ratio * width);
      const bar = `${"#".repeat(filled)}${"-".repeat(width - filled)}`;
      const text = `${label} [${bar}] ${format(done)}/${format(total)}${detail ? ` ${detail}` : ""}`;
      io.stderr.write(`\r\x1b[2K${text.slice(0, 160)}`);
      drawn = true;
    },
    finish() {
      if (drawn) io.stderr.write("\r\x1b[2K");
      drawn = false;
    },
  };
}

/**
 * Runs a long operation to its report, handing each event to `onEvent`; the progress lines are
 * cleared however it ends.
 */
export async function drainWithProgress<Event, Report>(
  operation: LongOperation<Event, Report>,
  lines: readonly Progress[],
  onEvent: (event: Event) => void,
): Promise<Report> {
  try {
    return await drain(operation, onEvent);
  } finally {
    for (const line of lines) line.finish();
  }
}
