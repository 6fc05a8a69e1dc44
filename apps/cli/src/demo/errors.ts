/** How a demo error maps to an exit code: `input` exits 2 (bad directory or option), `failed` exits 1. */
export type DemoErrorKind = "input" | "refused" | "failed";

/** A refusal or failure of `ckpt demo` / `ckpt evidence`, with a stable code. */
export class DemoError extends Error {
  override readonly name = "DemoError";
  readonly code: string;
  readonly kind: DemoErrorKind;

  constructor(code: string, message: string, kind: DemoErrorKind) {
    super(message);
    this.code = code;
    this.kind = kind;
  }
}
