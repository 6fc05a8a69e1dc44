import type { Writable } from "node:stream";
import { processSignals, type SignalSource } from "./interrupt.js";

/** Where the CLI writes, and what the terminal allows. Passed in so tests can capture output. */
export interface CliIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
  /** stderr is a terminal: progress bars are drawn only then. */
  readonly interactive: boolean;
  /** stdout is a terminal and NO_COLOR is unset: verdicts may be coloured. */
  readonly color: boolean;
  readonly env: NodeJS.ProcessEnv;
  /** SIGINT/SIGTERM, for commands that stop cleanly; none when the CLI runs inside another program. */
  readonly signals?: SignalSource;
}

/** Colour on a terminal unless NO_COLOR is set to a non-empty value (https://no-color.org). */
export function colorAllowed(isTerminal: boolean, env: NodeJS.ProcessEnv): boolean {
  return isTerminal && (env.NO_COLOR ?? "") === "" && env.TERM !== "dumb";
}

export function processIo(): CliIo {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    interactive: Boolean(process.stderr.isTTY),
    color: colorAllowed(Boolean(process.stdout.isTTY), process.env),
    env: process.env,
    signals: processSignals(),
  };
}

/** Options every command takes. */
export interface GlobalOptions {
  readonly json: boolean;
  readonly quiet: boolean;
}

/**
 * What a command hands back: its exit code, a JSON-able report (printed as-is under --json) and
 * the short human rendering of the same report. A command that makes something (a staged
 * directory, an archive, a fingerprint) names it in `result`: stdout then carries that alone, for
 * `$(...)`, and `human` (the statistics) goes to stderr. Without `result`, the report is the
 * result and `human` goes to stdout.
 */
export interface CommandOutcome {
  /**
   * 3: the command ran but left part of what was asked undone (a command's help says when);
   * 130/143: it was stopped by SIGINT/SIGTERM (`human` then says, on stderr, what it left).
   */
  readonly exitCode: 0 | 1 | 2 | 3 | 130 | 143;
  readonly report: unknown;
  readonly human: string;
  readonly result?: string;
}
