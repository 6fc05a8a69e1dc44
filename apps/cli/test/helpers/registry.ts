import { commands } from "../../src/commands/index.js";
import { type CommandEntry, isGroup } from "../../src/commands/registry.js";

/** Every runnable command as `artifact publish`, found from the registry (new commands are picked up). */
export function runnableCommands(
  entries: readonly CommandEntry[] = commands,
  prefix: string[] = [],
): string[] {
  return entries.flatMap((entry) => {
    const words = [...prefix, entry.command.split(" ")[0]!];
    return isGroup(entry) ? runnableCommands(entry.subcommands, words) : [words.join(" ")];
  });
}
