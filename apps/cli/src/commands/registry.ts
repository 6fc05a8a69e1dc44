import type { ExitCodes } from "@ckpt/command-line";
import type { Argv } from "yargs";
import type { CliIo, CommandOutcome, GlobalOptions } from "../io.js";

/**
 * A ckpt command: yargs wiring plus a handler that returns an outcome instead of printing, so
 * the runner owns --json, --quiet and exit codes in one place.
 */
export interface CkptCommand<A = Record<string, unknown>> {
  readonly command: string;
  readonly describe: string;
  readonly builder: (yargs: Argv) => Argv;
  readonly run: (args: A & GlobalOptions, io: CliIo) => Promise<CommandOutcome>;
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
