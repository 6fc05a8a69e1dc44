import yargs from "yargs";
import type { Argv } from "yargs";
import { commands } from "./commands/index.js";
import { type CommandEntry, isGroup } from "./commands/registry.js";
import { describeError, UsageError } from "./errors.js";
import { type CliIo, type CommandOutcome, type GlobalOptions, processIo } from "./io.js";

function write(stream: NodeJS.WritableStream, text: string): void {
  if (text.length > 0) stream.write(text.endsWith("\n") ? text : `${text}\n`);
}

function emit(outcome: CommandOutcome, options: GlobalOptions, io: CliIo): void {
  if (options.json) write(io.stdout, JSON.stringify(outcome.report, null, 2));
  else if (options.quiet && outcome.exitCode === 0) return;
  else if (outcome.result === undefined) write(io.stdout, outcome.human);
  else {
    write(io.stdout, outcome.result);
    write(io.stderr, outcome.human);
  }
}

/** Runs `ckpt <argv>` and resolves to the exit code. Never calls process.exit. */
export async function runCli(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  let outcome: CommandOutcome | undefined;
  let globals: GlobalOptions = { json: argv.includes("--json"), quiet: argv.includes("--quiet") };
  let helpText = "";
  const parser = yargs([...argv])
    .scriptName("ckpt")
    .usage("ckpt <command> [options]\n\nThe life of an ML training checkpoint, provable at every step.")
    .option("json", { type: "boolean", default: false, describe: "Print the report as JSON on stdout" })
    .option("quiet", { type: "boolean", default: false, describe: "Print nothing on success" })
    // From apps/cli/package.json at build time (yargs's own lookup finds no package.json in a bundle).
    .version(__CKPT_PACKAGE_VERSION__)
    .strict()
    .demandCommand(1, "Name a command; `ckpt --help` lists them.")
    .recommendCommands()
    .exitProcess(false)
    // The width of the stream help goes to (a captured stream has none: 110, so generated docs are stable).
    .wrap(Math.min(110, (io.stdout as { columns?: number }).columns ?? 110))
    .epilogue("Exit codes: 0 ok, 1 failed or refused, 2 bad usage or unusable input. Docs: docs/cli.md")
    .fail((message, error) => {
      throw error ?? new UsageError(message);
    });
  const register = (target: Argv, entry: CommandEntry): void => {
    if (isGroup(entry)) {
      target.command(entry.command, entry.describe, (group) => {
        for (const sub of entry.subcommands) register(group, sub);
        return group.demandCommand(
          1,
          `Name a subcommand; \`ckpt ${entry.command.split(" ")[0]} --help\` lists them.`,
        );
      });
      return;
    }
    target.command(entry.command, entry.describe, entry.builder, async (args) => {
      globals = { json: Boolean(args.json), quiet: Boolean(args.quiet) };
      // --quiet silences progress too: a command sees a non-interactive terminal.
      outcome = await entry.run(args as never, globals.quiet ? { ...io, interactive: false } : io);
    });
  };
  for (const entry of commands) register(parser, entry);
  try {
    await parser.parseAsync([...argv], {}, (_error, _args, output) => {
      helpText = output;
    });
  } catch (error) {
    const failure = describeError(error);
    if (globals.json) {
      write(
        io.stdout,
        JSON.stringify({ ok: false, error: { code: failure.code, message: failure.message } }, null, 2),
      );
    } else {
      write(io.stderr, `ckpt: ${failure.message}`);
      if (failure.code === "CLI_USAGE") write(io.stderr, "Run `ckpt --help` for usage.");
      // The code is what docs/troubleshooting.md is keyed by: name it so nobody re-runs with --json.
      else if (failure.code !== "INTERNAL")
        write(io.stderr, `ckpt: error code ${failure.code} (docs/troubleshooting.md)`);
    }
    return failure.exitCode;
  }
  if (outcome === undefined) {
    // --help or --version: yargs produced the text
    write(io.stdout, helpText);
    return 0;
  }
  emit(outcome, globals, io);
  return outcome.exitCode;
}
