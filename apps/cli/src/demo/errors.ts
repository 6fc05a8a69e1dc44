import { CkptError } from "@ckpt/errors";

/** How a demo error maps to an exit code: `input` exits 2 (bad directory or option), `failed` exits 1. */
export type DemoErrorKind = "input" | "refused" | "failed";

/** Every code `ckpt demo` / `ckpt evidence` raises itself. */
export type DemoErrorCode =
  | "DEMO_ARCHIVE_UNSOUND"
  | "DEMO_DIR_MISSING"
  | "DEMO_DIR_NOT_OURS"
  | "DEMO_NOTHING_TO_DAMAGE"
  | "DEMO_NO_ARTIFACT"
  | "DEMO_NO_CHECKPOINT"
  | "DEMO_NO_WORKER_ENTRY"
  | "DEMO_PRUNE_FAILED"
  | "DEMO_STATE_INCOMPLETE"
  | "DEMO_WORKER_FAILED";

/** A refusal or failure of `ckpt demo` / `ckpt evidence`, with a stable code. */
export class DemoError extends CkptError {
  override readonly name = "DemoError";
  declare readonly kind: DemoErrorKind;

  constructor(code: DemoErrorCode, message: string, kind: DemoErrorKind);
  /** A failure the demo trainer reported, under the code its library gave. */
  constructor(code: string, message: string, kind: "failed", from: "trainer");
  constructor(code: string, message: string, kind: DemoErrorKind) {
    super(code, message, { kind });
  }
}
