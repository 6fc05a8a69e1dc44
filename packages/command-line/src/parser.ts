import yargs, { type Argv } from "yargs";
import { exitCodesEpilogue } from "./exit-codes.js";
import { closestMatch, flagSuggestions } from "./suggest.js";

/** What a ckpt program tells the conventions about itself. */
export interface Program {
  /** The command's name on PATH (`ckpt`, `ckpt-trainer`). */
  readonly name: string;
  readonly version: string;
  /** One paragraph under the usage line of `<name> --help`. */
  readonly summary: string;
  /** Columns help text is wrapped to. */
  readonly width: number;
  /** The program's own usage error (code CLI_USAGE, kind input) carrying `message`. */
  readonly usageError: (message: string) => Error;
}

/** `help <words..>` read as `<words..> --help` (`ckpt help artifact publish`). */
export function expandHelpCommand(argv: readonly string[]): string[] {
  return argv[0] === "help" ? [...argv.slice(1), "--help"] : [...argv];
}

/**
 * The first of `words` (from `help <words..>`) that names no command, judged from the help yargs
 * printed: its usage line starts with the words it consumed. Undefined when all were consumed.
 */
function unconsumedHelpWord(words: readonly string[], help: string): string | undefined {
  const usage = (help.split("\n")[0] ?? "").split(" ");
  let consumed = 0;
  while (consumed < words.length && usage[consumed + 1] === words[consumed]) consumed++;
  return words[consumed];
}

/** Every option name the parser knows in the command being parsed, aliases included. */
function knownOptions(parser: Argv): string[] {
  const options = (
    parser as unknown as { getOptions(): { key: Record<string, unknown>; alias: Record<string, string[]> } }
  ).getOptions();
  return [...Object.keys(options.key), ...Object.values(options.alias).flat()];
}

/**
 * Parses `argv` for `program` with the conventions every ckpt program keeps: `-h`/`--help` on every
 * command, `help <command>`, `--version`, strict commands and options with "did you mean" for a
 * mistyped command or flag, `completion` (bash and zsh), and the exit codes under every help.
 * `register` adds the program's options and commands. Resolves to the text yargs produced (help,
 * version, completion), empty when a command ran; a bad command line rejects with
 * `program.usageError`, a command's own error rejects as thrown. Never exits the process.
 */
export async function runCommandLine(
  argv: readonly string[],
  program: Program,
  register: (parser: Argv) => void,
): Promise<string> {
  const effective = expandHelpCommand(argv);
  const { name } = program;
  const parser: Argv = yargs([...effective])
    .scriptName(name)
    .usage(
      `${name} <command> [options]\n\n${program.summary}\n\n\`${name} help <command>\` (or \`${name} <command> -h\`) prints a command's help.`,
    )
    .version(program.version)
    .help("help")
    .alias("help", "h")
    // strictCommands + strictOptions rather than strict(): strict() also refuses the `completion`
    // command that .completion() registers.
    .strictCommands()
    .strictOptions()
    .recommendCommands()
    .demandCommand(1, `Name a command; \`${name} --help\` lists them.`)
    .completion("completion", `Print the bash/zsh completion script: source <(${name} completion)`)
    .exitProcess(false)
    .wrap(program.width)
    .epilogue(exitCodesEpilogue())
    .fail((message, error) => {
      if (error !== undefined && error !== null) throw error;
      const hints = flagSuggestions(effective, knownOptions(parser));
      throw program.usageError([message, ...hints].join("\n"));
    });
  register(parser);
  let output = "";
  // The commands of the level parsing reached (read in the callback: yargs resets it afterwards).
  let reached: readonly string[] = [];
  await parser.parseAsync(effective, {}, (_error, _args, text) => {
    output = text;
    reached = (
      parser as unknown as { getInternalMethods(): { getCommandInstance(): { getCommands(): string[] } } }
    )
      .getInternalMethods()
      .getCommandInstance()
      .getCommands();
  });
  // yargs prints the nearest group's help for `<typo> --help`: `help <typo>` is refused instead.
  const unknown = argv[0] === "help" ? unconsumedHelpWord(argv.slice(1), output) : undefined;
  if (unknown !== undefined) {
    const match = closestMatch(unknown, reached);
    throw program.usageError(
      `Unknown command: ${unknown}.${match === undefined ? "" : ` Did you mean ${match}?`}`,
    );
  }
  return output;
}
