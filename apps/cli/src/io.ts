import type { Writable } from "node:stream";

/** Where the CLI writes, and what the terminal allows. Passed in so tests can capture output. */
export interface CliIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
  /** stderr is a terminal: progress bars are drawn only then. */
  readonly interactive: boolean;
  /** Colour is used only on a terminal and never when NO_COLOR is set. */
  readonly color: boolean;
  readonly env: NodeJS.ProcessEnv;
}

export function processIo(): CliIo {
  const interactive = Boolean(process.stderr.isTTY);
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    interactive,
    color: interactive && !("NO_COLOR" in process.env),
    env: process.env,
  };
}

/** Options every command takes. */
export interface GlobalOptions {
  readonly json: boolean;
  readonly quiet: boolean;
}

/**
 * What a command hands back: its exit code, a JSON-able report (printed as-is under --json) and
 * the short human rendering of the same report.
 */
export interface CommandOutcome {
  readonly exitCode: 0 | 1 | 2;
  readonly report: unknown;
  readonly human: string;
}
