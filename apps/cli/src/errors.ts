import { CkptError } from "@ckpt/errors";

/** Every code the CLI raises itself (the libraries' errors keep their own codes). */
type CliErrorCode =
  | "CLI_USAGE"
  | "CLI_NOT_A_DIRECTORY"
  | "CLI_IS_A_DIRECTORY"
  | "PUBLISH_DESTINATION_CONFLICT"
  | "MCP_PATH_REFUSED"
  | "MCP_PATH_NOT_FOUND"
  | "UI_STOPPED"
  | "UI_ASSETS_MISSING";

/** A bad command line: exit 2. */
export class UsageError extends CkptError<CliErrorCode> {
  override readonly name = "UsageError";
  constructor(message: string) {
    super("CLI_USAGE", message, { kind: "input" });
  }
}

/** A publish whose destination contradicts the artifact's own path or receipt: exit 2 unless --force. */
export class DestinationConflictError extends CkptError<CliErrorCode> {
  override readonly name = "DestinationConflictError";
  constructor(message: string) {
    super("PUBLISH_DESTINATION_CONFLICT", message, { kind: "input" });
  }
}

/**
 * A path argument of an MCP tool that is not inside the served root (`MCP_PATH_REFUSED`: an escape
 * through `..` or a symbolic link, a loop, a NUL byte, ...) or names nothing there.
 */
export class McpPathError extends CkptError<CliErrorCode> {
  override readonly name = "McpPathError";
  constructor(code: "MCP_PATH_REFUSED" | "MCP_PATH_NOT_FOUND", message: string) {
    super(code, message, { kind: "input" });
  }
}

/** `ckpt ui` without its page: the installed package lacks the files its build put beside the CLI. */
export class UiAssetsError extends CkptError<CliErrorCode> {
  override readonly name = "UiAssetsError";
  constructor(message: string) {
    super("UI_ASSETS_MISSING", message, { kind: "failed" });
  }
}

/** A path of the wrong kind on the way to what a command reads or writes: exit 2, with the fix. */
class PathKindError extends CkptError<CliErrorCode> {
  override readonly name = "PathKindError";
  constructor(code: "CLI_NOT_A_DIRECTORY" | "CLI_IS_A_DIRECTORY", message: string, cause: unknown) {
    super(code, message, { kind: "input", cause });
  }
}

/**
 * A raw ENOTDIR or EISDIR from the file system (a path given where the other kind is needed)
 * as the coded error naming the path and the fix; undefined for anything else.
 */
export function pathKindError(error: unknown): PathKindError | undefined {
  const errno = error as NodeJS.ErrnoException | undefined;
  const path = errno?.path ?? "a path";
  const call = errno?.syscall === undefined ? "" : `, ${errno.syscall}`;
  if (errno?.code === "ENOTDIR") {
    return new PathKindError(
      "CLI_NOT_A_DIRECTORY",
      `${path}: a file stands where a directory is needed (ENOTDIR${call}). Pass a directory, or move the file on that path aside.`,
      error,
    );
  }
  if (errno?.code === "EISDIR") {
    return new PathKindError(
      "CLI_IS_A_DIRECTORY",
      `${path}: a directory stands where a file is needed (EISDIR${call}). Pass a file, or move the directory on that path aside.`,
      error,
    );
  }
  return undefined;
}
