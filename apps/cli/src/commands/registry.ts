import type { ExitCodes } from "@ckpt/command-line";
import type { Argv } from "yargs";
import type { CliIo, CommandOutcome, GlobalOptions } from "../io.js";

/** What the runner hands a command besides its arguments and streams. */
interface CommandContext {
  /** Aborts on SIGINT or SIGTERM (for a command that declares `abortCode`); pass it to the library. */
  readonly signal: AbortSignal;
  /** Records what an interruption from now on would leave and how to resume (one sentence). */
  leaves(note: string): void;
}

/**
 * A ckpt command: yargs wiring plus a handler that returns an outcome instead of printing, so
 * the runner owns --json, --quiet, exit codes and interruptions in one place.
 */
export interface CkptCommand<A = Record<string, unknown>> {
  readonly command: string;
  /** Earlier names that still run this command, shown in its help (one vocabulary: docs/cli.md). */
  readonly aliases?: readonly string[];
  readonly describe: string;
  readonly builder: (yargs: Argv) => Argv;
  /**
   * A long command that stops cleanly on SIGINT/SIGTERM declares the abort code of the library it
   * drives; the others are ended at once by the first signal, saying what they leave.
   */
  readonly abortCode?: string;
  /**
   * For a command without `abortCode` that writes: what ending it at any moment leaves, and how
   * to resume (one sentence). A command that only reads leaves nothing and declares none.
   */
  readonly interruptLeaves?: string;
  readonly run: (args: A & GlobalOptions, io: CliIo, context: CommandContext) => Promise<CommandOutcome>;
  /** What this command's exit codes mean beyond the standard ones (0 ok, 1 failed, 2 usage); its help lists them. */
  readonly exitCodes?: ExitCodes;
}

// biome-ignore lint/suspicious/noExplicitAny: each command declares its own argument type
type AnyCommand = CkptCommand<any>;

/** A command that only groups others (`ckpt artifact publish`, `ckpt store copy`, ...). */
export interface CkptCommandGroup {
  readonly command: string;
  readonly describe: string;
  readonly subcommands: readonly CommandEntry[];
}

export type CommandEntry = AnyCommand | CkptCommandGroup;

export function isGroup(entry: CommandEntry): entry is CkptCommandGroup {
  return "subcommands" in entry;
}
