import { drain, type LongOperation } from "@ckpt/progress";
import type { CliIo } from "./io.js";
import { formatBytes } from "./render.js";

/** A progress display for long work. Drawn on stderr, on a terminal only; silent otherwise. */
export interface Progress {
  /**
   * `done` and `total` in bytes (or items when `unit` is "items"); `detail` names what is being
   * worked on (a file, a tensor, a step).
   */
  update(done: number, total: number, detail?: string): void;
  /** With `files`: the file `detail` named is complete; the line moves on to one still in flight. */
  fileDone(name: string): void;
  /** Clears the line; call once the work ends (success or failure). */
  finish(): void;
}

const REDRAW_MS = 100; // a terminal cannot show more; avoids flooding slow ttys
const RATE_WINDOW_MS = 5000; // the rate over the last seconds, so a stall shows and a burst fades
const FALLBACK_COLUMNS = 80;
const BAR_WIDTH = 10;

/** What one progress line says; `rate` per second, undefined until it can be measured. */
export interface ProgressState {
  readonly label: string;
  readonly unit: "bytes" | "items";
  readonly done: number;
  readonly total: number;
  readonly rate: number | undefined;
  readonly detail: string | undefined;
}

function formatDuration(seconds: number): string {
  const s = Math.ceil(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n: number) => String(n).padStart(2, "0");
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

/**
 * The progress line, at most `columns - 1` characters (the last column would wrap some terminals,
 * and a wrapped line cannot be redrawn with \r): label, a bar, done/total and percent, rate, time left,
 * then the detail, cut from its start so the end of a long file name stays readable. Pure.
 */
export function progressLine(state: ProgressState, columns: number): string {
  const format = (n: number) => (state.unit === "bytes" ? formatBytes(n) : String(n));
  const ratio = state.total > 0 ? Math.min(1, state.done / state.total) : 0;
  const filled = Math.round(ratio * BAR_WIDTH);
  const bar = `[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}]`;
  const parts = [
    state.label,
    bar,
    `${format(state.done)}/${format(state.total)}`,
    `${Math.floor(ratio * 100)}%`,
  ];
  if (state.rate !== undefined && state.rate > 0) {
    parts.push(state.unit === "bytes" ? `${formatBytes(state.rate)}/s` : `${state.rate.toFixed(1)}/s`);
    if (state.done < state.total)
      parts.push(`${formatDuration((state.total - state.done) / state.rate)} left`);
  }
  const head = parts.join(" ");
  const width = Math.max(1, columns - 1);
  if (head.length >= width) return head.slice(0, width);
  if (state.detail === undefined || state.detail === "") return head;
  const room = width - head.length - 1;
  const detail = state.detail.length <= room ? state.detail : `…${state.detail.slice(-(room - 1))}`;
  return room < 2 ? head : `${head} ${detail}`;
}

export function createProgress(
  io: CliIo,
  label: string,
  options: {
    quiet?: boolean;
    unit?: "bytes" | "items";
    /**
     * Details are file names the caller marks complete with `fileDone`: the line names the
     * longest-running one still in flight (a big file keeps its name while small ones come and
     * go), with how many others are in flight. Otherwise the line names the latest detail.
     */
    files?: boolean;
  } = {},
): Progress {
  if (!io.interactive || options.quiet) return { update() {}, fileDone() {}, finish() {} };
  const unit = options.unit ?? "bytes";
  const samples: Array<{ at: number; done: number }> = [];
  const inFlight = new Set<string>();
  let latest: string | undefined;
  let lastDraw = 0;
  let drawn = false;
  const describe = (): string | undefined => {
    if (!options.files) return latest;
    const [oldest] = inFlight;
    if (oldest === undefined) return latest;
    return inFlight.size > 1 ? `${oldest} (+${inFlight.size - 1})` : oldest;
  };
  return {
    update(done, total, detail) {
      const now = performance.now();
      if (detail !== undefined) {
        latest = detail;
        if (options.files) inFlight.add(detail);
      }
      samples.push({ at: now, done });
      while (samples.length > 2 && now - samples[1]!.at > RATE_WINDOW_MS) samples.shift();
      if (now - lastDraw < REDRAW_MS && done < total) return;
      lastDraw = now;
      const first = samples[0]!;
      const elapsed = (now - first.at) / 1000;
      const rate = elapsed > 0.2 ? (done - first.done) / elapsed : undefined;
      // Read at every draw: the terminal may have been resized.
      const columns = (io.stderr as { columns?: number }).columns || FALLBACK_COLUMNS;
      const text = progressLine({ label, unit, done, total, rate, detail: describe() }, columns);
      io.stderr.write(`\r\x1b[2K${text}`);
      drawn = true;
    },
    fileDone(name) {
      inFlight.delete(name);
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
