/** Exit code -> what it means for one command (a command's help lists them). */
export type ExitCodes = Readonly<Record<number, string>>;

/** What every command's exit codes mean unless the command says more. */
export const STANDARD_EXIT_CODES: ExitCodes = {
  0: "ok",
  1: "failed or refused",
  2: "bad usage or unusable input",
};

/**
 * The "Exit codes: ..." epilogue of a command's help: the standard codes with the command's own
 * meanings laid over them, in numeric order.
 */
export function exitCodesEpilogue(own: ExitCodes = {}): string {
  const codes = { ...STANDARD_EXIT_CODES, ...own };
  const listed = Object.keys(codes)
    .map(Number)
    .sort((a, b) => a - b)
    .map((code) => `${code} ${codes[code]}`);
  return `Exit codes: ${listed.join("; ")}.`;
}
