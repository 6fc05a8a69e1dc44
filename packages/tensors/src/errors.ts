/** What the caller can do about an error; the CLI maps `input` to exit 2 and the rest to exit 1. */
export type ErrorKind = "input" | "refused" | "failed" | "transient";

/**
 * The one error class of @ckpt/tensors. A malformed or hostile file is always this class with a
 * stable `code` (never an untyped exception), naming the file and, where known, the tensor.
 */
export class TensorsError extends Error {
  override readonly name = "TensorsError";
  readonly code: string;
  readonly kind: ErrorKind;
  readonly file: string | undefined;
  readonly tensor: string | undefined;

  constructor(
    code: string,
    message: string,
    options: { kind?: ErrorKind; file?: string; tensor?: string; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.kind = options.kind ?? "input";
    this.file = options.file;
    this.tensor = options.tensor;
  }
}
