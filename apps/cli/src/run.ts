import {
  describeFailure,
  exitCodesEpilogue,
  failureLines,
  failureReport,
  runCommandLine,
} from "@ckpt/command-line";
import type { Argv } from "yargs";
import { commands } from "./commands/index.js";
import { type CkptCommand, type CommandEntry, isGroup } from "./commands/registry.js";
import { pathKindError, UsageError } from "./errors.js";
import { interruptedOutcome, READ_ONLY_LEAVES, STOP_EXIT_CODES, type StopSignal } from "./interrupt.js";
import { type CliIo, type CommandOutcome, type GlobalOptions, processIo } from "./io.js";
import { jsonReport } from "./json.js";

function write(stream: NodeJS.WritableStream, text: string): void {
  if (text.length > 0) stream.write(text.endsWith("\n") ? text : `${text}\n`);
}

function emit(outcome: CommandOutcome, options: GlobalOptions, io: CliIo): void {
  // An interruption's one line goes to stderr whatever the mode: stdout carries only results.
  const interrupted = outcome.exitCode === 130 || outcome.exitCode === 143;
  if (options.json) write(io.stdout, jsonReport(outcome.report));
  if (interrupted) write(io.stderr, outcome.human);
  else if (options.json || (options.quiet && outcome.exitCode === 0)) return;
  else if (outcome.result === undefined) write(io.stdout, outcome.human);
  else {
    // A command that makes something prints only what it made on stdout; its account goes to stderr.
    write(io.stdout, outcome.result);
    write(io.stderr, outcome.human);
  }
}

/** A command's context when it cannot be stopped: a signal that never aborts, notes unused. */
const unstoppable = { signal: new AbortController().signal, leaves() {} };

/**
 * Runs a short command: the first SIGINT/SIGTERM ends the process at once (there is nothing to
 * abort), after the one stderr line, and under --json the report, saying what it leaves.
 */
async function runShort(
  entry: CkptCommand,
  args: never,
  io: CliIo,
  options: GlobalOptions,
): Promise<CommandOutcome> {
  const unlisten = io.signals?.listen((signal) => {
    const outcome = interruptedOutcome(signal, { leaves: entry.interruptLeaves ?? READ_ONLY_LEAVES });
    emit(outcome, options, io);
    io.signals?.exitNow(outcome.exitCode);
  });
  try {
    return await entry.run(args, io, unstoppable);
  } finally {
    unlisten?.();
  }
}

/**
 * Runs a command that stops cleanly: the first SIGINT/SIGTERM aborts the one signal it hands the
 * libraries, and the rejection that follows becomes the interrupted outcome; a second signal
 * while it stops ends the process at once.
 */
async function runStoppable(
  entry: CkptCommand & { abortCode: string },
  args: never,
  io: CliIo,
): Promise<CommandOutcome> {
  const stop = new AbortController();
  let received: StopSignal | undefined;
  let leaves = "stopped before it changed anything; run the same command again";
  const unlisten = io.signals?.listen((signal) => {
    if (received !== undefined) {
      write(io.stderr, `interrupted again (${signal}): stopped at once, without cleaning up`);
      io.signals?.exitNow(STOP_EXIT_CODES[signal]);
    }
    received = signal;
    stop.abort(new Error(`${signal} received`));
  });
  try {
    return await entry.run(args, io, {
      signal: stop.signal,
      leaves: (note) => {
        leaves = note;
      },
    });
  } catch (error) {
    if (received === undefined) throw error;
    return interruptedOutcome(received, { code: entry.abortCode, leaves }, error);
  } finally {
    unlisten?.();
  }
}

const nameOf = (entry: CommandEntry): string => entry.command.split(" ")[0]!;

/**
 * `argv` with a command's earlier name (`doctor store`) replaced by its name (`doctor
 * object-store`), so `help <command>` and suggestions work for both. Stops at the first word that
 * names no command (an argument).
 */
function currentCommandNames(argv: readonly string[], entries: readonly CommandEntry[] = commands): string[] {
  const out = [...argv];
  let level: readonly CommandEntry[] | undefined = entries;
  for (let i = out[0] === "help" ? 1 : 0; i < out.length && level !== undefined; i++) {
    const word = out[i]!;
    if (word.startsWith("-")) continue;
    const entry: CommandEntry | undefined = level.find(
      (e) => nameOf(e) === word || (!isGroup(e) && (e.aliases ?? []).includes(word)),
    );
    if (entry === undefined) break;
    out[i] = nameOf(entry);
    level = isGroup(entry) ? entry.subcommands : undefined;
  }
  return out;
}

/** Runs `ckpt <argv>` and resolves to the exit code. Never calls process.exit. */
export async function runCli(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  let outcome: CommandOutcome | undefined;
  let globals: GlobalOptions = { json: argv.includes("--json"), quiet: argv.includes("--quiet") };
  const register = (target: Argv, entry: CommandEntry): void => {
    if (isGroup(entry)) {
      target.command(entry.command, entry.describe, (group) => {
        for (const sub of entry.subcommands) register(group, sub);
        return group
          .demandCommand(1, `Name a subcommand; \`ckpt ${nameOf(entry)} --help\` lists them.`)
          .epilogue(exitCodesEpilogue());
      });
      return;
    }
    // Every command's help lists what SIGINT/SIGTERM end it with.
    const exitCodes = {
      ...entry.exitCodes,
      [STOP_EXIT_CODES.SIGINT]: "stopped by SIGINT",
      [STOP_EXIT_CODES.SIGTERM]: "stopped by SIGTERM",
    };
    target.command(
      [entry.command, ...(entry.aliases ?? [])],
      entry.describe,
      (yargs) => entry.builder(yargs).epilogue(exitCodesEpilogue(exitCodes)),
      async (args) => {
        globals = { json: Boolean(args.json), quiet: Boolean(args.quiet) };
        // --quiet silences progress too: a command sees a non-interactive terminal.
        const commandIo = globals.quiet ? { ...io, interactive: false } : io;
        const abortCode = entry.abortCode;
        outcome =
          abortCode === undefined
            ? await runShort(entry, args as never, commandIo, globals)
            : await runStoppable({ ...entry, abortCode }, args as never, commandIo);
      },
    );
  };
  let helpText: string;
  try {
    helpText = await runCommandLine(
      currentCommandNames(argv),
      {
        name: "ckpt",
        // From apps/cli/package.json at build time (yargs's own lookup finds no package.json in a bundle).
        version: __CKPT_PACKAGE_VERSION__,
        summary: "The life of an ML training checkpoint, provable at every step. Docs: docs/cli.md",
        // The width of the stream help goes to (a captured stream has none: 110, so generated docs are stable).
        width: Math.min(110, (io.stdout as { columns?: number }).columns ?? 110),
        usageError: (message) => new UsageError(message),
      },
      (parser) => {
        parser
          .option("json", { type: "boolean", default: false, describe: "Print the report as JSON on stdout" })
          .option("quiet", { type: "boolean", default: false, describe: "Print nothing on success" });
        for (const entry of commands) register(parser, entry);
      },
    );
  } catch (error) {
    const failure = describeFailure(pathKindError(error) ?? error);
    if (globals.json) write(io.stdout, jsonReport(failureReport(failure)));
    else for (const line of failureLines("ckpt", failure)) write(io.stderr, line);
    return failure.exitCode;
  }
  if (outcome === undefined) {
    // --help, --version or completion: yargs produced the text
    write(io.stdout, helpText);
    return 0;
  }
  emit(outcome, globals, io);
  return outcome.exitCode;
}
