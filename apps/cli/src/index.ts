export { runCli } from "./run.js";
export type { CliIo, CommandOutcome, GlobalOptions } from "./io.js";
