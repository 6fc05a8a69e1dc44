import { CkptError } from "@ckpt/errors";

/** Every code the CLI raises itself (the libraries' errors keep their own codes). */
type CliErrorCode = "CLI_USAGE" | "INTERNAL";

/** A bad command line: exit 2. */
export class UsageError extends CkptError<CliErrorCode> {
  override readonly name = "UsageError";
  constructor(message: string) {
    super("CLI_USAGE", message, { kind: "input" });
  }
}

interface CodedError {
  readonly code: string;
  readonly kind?: string;
  readonly message: string;
}

function isCoded(error: unknown): error is CodedError {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string";
}

/**
 * The one place errors become exit codes: bad usage or unusable input exit 2, every other coded
 * error (a refusal, a failed operation) exits 1. Uncoded errors are internal faults (exit 1).
 */
export function describeError(error: unknown): { exitCode: 1 | 2; code: string; message: string } {
  if (isCoded(error)) {
    return { exitCode: error.kind === "input" ? 2 : 1, code: error.code, message: error.message };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { exitCode: 1, code: "INTERNAL", message: `internal error: ${message}` };
}
