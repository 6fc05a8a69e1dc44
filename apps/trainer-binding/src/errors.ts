import { CkptError } from "@ckpt/errors";

export type { ErrorKind } from "@ckpt/errors";

/** Every code this app raises itself (errors of the manager travel with their own codes). */
export const BINDING_ERROR_CODES = [
  "PROTOCOL_PARSE",
  "PROTOCOL_LINE_TOO_LONG",
  "PROTOCOL_BAD_REQUEST",
  "PROTOCOL_UNKNOWN_OP",
  "PROTOCOL_VERSION",
  "PROTOCOL_HELLO_REQUIRED",
  "PROTOCOL_BUSY",
  "SESSION_NOT_OPEN",
  "SESSION_ALREADY_OPEN",
  "SESSION_FINALIZED",
  "SAVE_UNKNOWN",
  "SAVE_IN_PROGRESS",
  "INVENTORY_UNSAFE_PATH",
  "INVENTORY_DUPLICATE_PATH",
  "SOCKET_EXISTS",
  "DATA_BAD_REQUEST",
  "DATA_NOT_FOUND",
  "TEMPLATE_OPTION_INVALID",
  "CLI_USAGE",
  "INTERNAL",
] as const;
export type BindingErrorCode = (typeof BINDING_ERROR_CODES)[number];

/**
 * The one error class of the trainer binding. `code` is stable and documented in
 * docs/trainer-binding.md; it is what a client switches on.
 */
export class TrainerBindingError extends CkptError<BindingErrorCode> {
  override readonly name = "TrainerBindingError";
}
