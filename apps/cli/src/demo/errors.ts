import { CkptError } from "@ckpt/errors";

/** How a demo error maps to an exit code: `input` exits 2 (bad directory or option), `failed` exits 1. */
export type DemoErrorKind = "input" | "refused" | "failed";

/** A refusal or failure of `ckpt demo` / `ckpt evidence`, with a stable code. */
export class DemoError extends CkptError {
  override readonly name = "DemoError";
  declare readonly kind: DemoErrorKind;

  constructor(code: string, message: string, kind: DemoErrorKind) {
    super(code, message, { kind });
  }
}
