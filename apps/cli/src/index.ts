export { runCli } from "./run.js";
export type { CliIo, CommandOutcome, GlobalOptions } from "./io.js";
// The command tree and the closed set of verify problem codes, for the docs generators
// (tools/docs/: the CLI reference and the troubleshooting index are built from these).
export { commands } from "./commands/index.js";
export { type CommandEntry, isGroup } from "./commands/registry.js";
export { verifyProblemCodes } from "./commands/verify.js";
// What a command's help says of its exit codes, for the same line in docs/cli.md.
export { exitCodesEpilogue } from "@ckpt/command-line";
