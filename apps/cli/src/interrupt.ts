import type { CommandOutcome } from "./io.js";

/** The signals that stop a long command cleanly. */
export type StopSignal = "SIGINT" | "SIGTERM";

/** The shell's convention: 128 + the signal number. */
export const STOP_EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const satisfies Record<StopSignal, number>;

/** Where stop signals come from, and how the process ends at once (the process's own; tests may pass none). */
export interface SignalSource {
  /** Calls `onSignal` for each SIGINT or SIGTERM until the returned function is called. */
  listen(onSignal: (signal: StopSignal) => void): () => void;
  /** Ends the process now with `code` (a second signal while a command stops). */
  exitNow(code: number): never;
}

export function processSignals(): SignalSource {
  return {
    listen(onSignal) {
      const onInt = () => onSignal("SIGINT");
      const onTerm = () => onSignal("SIGTERM");
      process.on("SIGINT", onInt);
      process.on("SIGTERM", onTerm);
      return () => {
        process.off("SIGINT", onInt);
        process.off("SIGTERM", onTerm);
      };
    },
    exitNow: (code) => process.exit(code),
  };
}

/**
 * What a command says when interrupted: for a long command, the abort code of the library it
 * drives (declared in that library's code union); and what an interruption now leaves behind and
 * how to resume (kept current while a long command runs).
 */
export interface InterruptNote {
  /** None for a short command: it is ended, not aborted, so no library stopped with a code. */
  readonly code?: string;
  /** One sentence: the state left and the way to resume. */
  readonly leaves: string;
}

/** The caught error as `{ code, message }` for the report (uncoded errors keep their message). */
function cause(error: unknown): { code: string | null; message: string } {
  const code = (error as { code?: unknown } | undefined)?.code;
  return {
    code: typeof code === "string" ? code : null,
    message: error instanceof Error ? error.message : String(error),
  };
}

/**
 * The outcome of a command stopped by `signal`: exit 128 + the signal's number, the one line
 * saying what was left (`human`), and the JSON report with the command's abort code and the
 * error the library stopped with (a short command, ended at once, has neither). Pure.
 */
export function interruptedOutcome(signal: StopSignal, note: InterruptNote, error?: unknown): CommandOutcome {
  const line = `interrupted (${signal}): ${note.leaves}`;
  return {
    exitCode: STOP_EXIT_CODES[signal],
    human: line,
    report: {
      ok: false,
      interrupted: signal,
      error: { code: note.code ?? null, message: line },
      leaves: note.leaves,
      ...(note.code === undefined ? {} : { cause: cause(error) }),
    },
  };
}

/** What a short command that only reads leaves when a signal ends it. */
export const READ_ONLY_LEAVES = "nothing was changed (it only reads); run the same command again";
