/** What the caller can do about an error; the CLI maps `input` to exit 2 and the rest to exit 1. */
export type ErrorKind = "input" | "refused" | "failed" | "transient";

const KINDS: ReadonlySet<string> = new Set<ErrorKind>(["input", "refused", "failed", "transient"]);

/**
 * The base of every ckpt error class: a stable UPPER_SNAKE `code` from the owning package's code
 * union and a `kind`, which every throw site states (there is no default, so the exit code of a
 * site never depends on which package's class it used).
 */
export abstract class CkptError<Code extends string = string> extends Error {
  readonly code: Code;
  readonly kind: ErrorKind;

  constructor(code: Code, message: string, options: { kind: ErrorKind; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.kind = options.kind;
  }
}

/** A ckpt error about one file, object key or URI, named in `subject` (never a secret). */
export abstract class CkptSubjectError<Code extends string = string> extends CkptError<Code> {
  readonly subject: string | undefined;

  constructor(code: Code, message: string, options: { kind: ErrorKind; subject?: string; cause?: unknown }) {
    super(code, message, options);
    this.subject = options.subject;
  }
}

/** The kind of any error: its own when it carries a valid one (every ckpt error does), else `failed`. */
export function kindOf(error: unknown): ErrorKind {
  const kind = (error as { kind?: unknown } | undefined)?.kind;
  return typeof kind === "string" && KINDS.has(kind) ? (kind as ErrorKind) : "failed";
}

/** The message of anything thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Quotes untrusted text for a message: cut to `limit` characters (marked `…`), then JSON-escaped. */
export function truncateForMessage(text: string, limit = 40): string {
  return JSON.stringify(text.length > limit ? `${text.slice(0, limit)}…` : text);
}

/**
 * Whether `error` is an abort its caller asked for rather than a failure: a ckpt error coded
 * `*_ABORTED` (by whichever package noticed the signal first: the store, the hasher, ...) or the
 * platform's AbortError. A package wrapping another's errors re-raises these as its own abort
 * code, never as a failure of the package it called.
 */
export function isAbort(error: unknown): boolean {
  const { code, name } = (error ?? {}) as { code?: unknown; name?: unknown };
  return (typeof code === "string" && code.endsWith("_ABORTED")) || name === "AbortError";
}
