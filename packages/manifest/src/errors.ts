/** What the caller can do about an error; the CLI maps `input` to exit 2 and the rest to exit 1. */
export type ErrorKind = "input" | "refused" | "failed" | "transient";

/**
 * The one error class of @ckpt/manifest. `code` is stable (documented in docs/troubleshooting.md);
 * `file` and `field` name what was wrong so a message can point at it.
 */
export class ManifestError extends Error {
  override readonly name = "ManifestError";
  readonly code: string;
  readonly kind: ErrorKind;
  readonly file: string | undefined;
  readonly field: string | undefined;

  constructor(
    code: string,
    message: string,
    options: { kind?: ErrorKind; file?: string; field?: string; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.kind = options.kind ?? "input";
    this.file = options.file;
    this.field = options.field;
  }
}
