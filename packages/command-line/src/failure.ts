import { messageOf } from "@ckpt/errors";

/** The one code the conventions give an error that carries none: a fault of the program itself. */
export type CommandLineFailureCode = "INTERNAL";

/** The code of a bad command line in every ckpt program (the usage errors they throw carry it). */
export const USAGE_ERROR_CODE = "CLI_USAGE";

/** A failed run as a user sees it: the exit code, the stable error code and the message. */
export interface Failure {
  readonly exitCode: 1 | 2;
  readonly code: string;
  readonly message: string;
}

function isCoded(error: unknown): error is Error & { code: string; kind?: unknown } {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string";
}

/**
 * The one place an error becomes an exit code: bad usage or unusable input (`kind: "input"`)
 * exits 2, every other coded error (a refusal, a failed operation) exits 1. Uncoded errors are
 * internal faults (exit 1).
 */
export function describeFailure(error: unknown): Failure {
  if (isCoded(error)) {
    return { exitCode: error.kind === "input" ? 2 : 1, code: error.code, message: error.message };
  }
  const code: CommandLineFailureCode = "INTERNAL";
  return { exitCode: 1, code, message: `internal error: ${messageOf(error)}` };
}

/**
 * The lines `program` prints on stderr for a failure: the message, then either where usage is
 * explained or the error code (the key of docs/troubleshooting.md, so nobody re-runs with --json).
 */
export function failureLines(program: string, failure: Failure): string[] {
  const lines = [`${program}: ${failure.message}`];
  if (failure.code === USAGE_ERROR_CODE) lines.push(`Run \`${program} --help\` for usage.`);
  else if (failure.code !== "INTERNAL")
    lines.push(`${program}: error code ${failure.code} (docs/troubleshooting.md)`);
  return lines;
}

/** The JSON document a failure is under --json: the same shape as a command's report. */
export function failureReport(failure: Failure): {
  ok: false;
  error: { code: string; message: string };
} {
  return { ok: false, error: { code: failure.code, message: failure.message } };
}
