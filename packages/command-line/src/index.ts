export { type ExitCodes, exitCodesEpilogue, STANDARD_EXIT_CODES } from "./exit-codes.js";
export {
  type CommandLineFailureCode,
  describeFailure,
  type Failure,
  failureLines,
  failureReport,
  USAGE_ERROR_CODE,
} from "./failure.js";
export { expandHelpCommand, type Program, runCommandLine } from "./parser.js";
export { closestMatch, flagSuggestions } from "./suggest.js";
