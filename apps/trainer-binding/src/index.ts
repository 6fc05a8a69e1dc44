// Public surface of @ckpt/trainer-binding: the ckpt-trainer sidecar's protocol and transports, for
// embedding the sidecar or testing against it. The command itself is `ckpt-trainer` (src/bin.ts).

export { BINDING_ERROR_CODES, type BindingErrorCode, type ErrorKind, TrainerBindingError } from "./errors.js";
export {
  type OpArgs,
  type OpName,
  type Request,
  type RequestId,
  type Response,
  type WireError,
  MAX_LINE_BYTES,
  OP_NAMES,
  PROTOCOL_VERSIONS,
  encodeResponse,
  negotiateVersion,
  parseRequest,
} from "./protocol/messages.js";
export {
  type ConnectionEnd,
  type RequestHandler,
  serveConnection,
  toWireError,
} from "./protocol/connection.js";
export {
  type HandlerFactory,
  handleSidecarSignals,
  serveSocket,
  type SidecarSignal,
  type SignalAction,
  sidecarSignalAction,
} from "./serve.js";
export { type SessionOptions, SidecarSession } from "./session.js";
export {
  MAX_GRACE_SECONDS,
  MIN_GRACE_SECONDS,
  SENTINEL_FILE,
  type SlurmTemplateOptions,
  renderSlurmTemplate,
} from "./slurm-template.js";
export { EXAMPLE_TRAINER, PYTHON_CLIENT_DIR, serverVersion } from "./package-files.js";
export { type BinIo, runTrainerBin } from "./cli.js";
