import { truncateForMessage } from "@ckpt/errors";
import { realpath } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { ManifestError, type ManifestErrorCode } from "../errors.js";

/** Longest relative path accepted, in UTF-8 bytes: Linux PATH_MAX; longer names cannot be opened anyway. */
const MAX_RELATIVE_PATH_BYTES = 4096;
/** Longest single segment, in UTF-8 bytes: the usual NAME_MAX of Linux file systems. */
const MAX_PATH_SEGMENT_BYTES = 255;

/** Why a string is not a safe relative POSIX path: a stable code and a sentence. */
export interface PathProblem {
  code: ManifestErrorCode;
  reason: string;
}

/**
 * Returns why `path` is not a relative POSIX path that stays below the directory it is joined to,
 * or undefined when it is safe. Pure: no file is touched.
 */
export function pathProblem(path: string): PathProblem | undefined {
  if (path.length === 0) return { code: "PATH_EMPTY", reason: "the path is empty" };
  if (path.includes("\0")) return { code: "PATH_NUL", reason: "the path contains a NUL character" };
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0001-\u001f\u007f]/.test(path)) {
    return { code: "PATH_CONTROL_CHAR", reason: "the path contains a control character" };
  }
  if (path.includes("\\")) {
    return { code: "PATH_BACKSLASH", reason: "the path contains a backslash; paths use '/' only" };
  }
  if (path.startsWith("/")) return { code: "PATH_ABSOLUTE", reason: "the path is absolute" };
  if (Buffer.byteLength(path, "utf8") > MAX_RELATIVE_PATH_BYTES) {
    return { code: "PATH_TOO_LONG", reason: `the path is longer than ${MAX_RELATIVE_PATH_BYTES} bytes` };
  }
  for (const segment of path.split("/")) {
    if (segment === "..") return { code: "PATH_TRAVERSAL", reason: "the path has a '..' segment" };
    if (segment === ".") return { code: "PATH_DOT_SEGMENT", reason: "the path has a '.' segment" };
    if (segment === "") {
      return { code: "PATH_EMPTY_SEGMENT", reason: "the path has an empty segment ('//' or a trailing '/')" };
    }
    if (Buffer.byteLength(segment, "utf8") > MAX_PATH_SEGMENT_BYTES) {
      return { code: "PATH_TOO_LONG", reason: `a segment is longer than ${MAX_PATH_SEGMENT_BYTES} bytes` };
    }
  }
  return undefined;
}

/**
 * Throws a `PATH_*` ManifestError unless `path` is a safe relative POSIX path. `context` names
 * where the path came from (a record file and field, a CLI flag) for the message.
 */
export function assertSafeRelativePath(path: string, context: string): void {
  if (typeof path !== "string") {
    throw new ManifestError(
      "PATH_NOT_STRING",
      `check path in ${context}: it is not a string. Paths are strings.`,
      { kind: "input" },
    );
  }
  const problem = pathProblem(path);
  if (problem !== undefined) {
    throw new ManifestError(
      problem.code,
      `check path ${truncateForMessage(path)} in ${context}: ${problem.reason}. ` +
        "Paths in ckpt records are relative POSIX paths without '.', '..' or empty segments.",
      { kind: "input", file: context },
    );
  }
}

/** `candidate` is `root` itself or lies below it (lexically: neither resolves links). Pure. */
export function isInside(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === "" || (!isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${sep}`));
}

/**
 * Joins a safe relative path to `root` and proves the result stays inside it on disk: the
 * deepest existing ancestor of the target (the target itself when it exists) is resolved through
 * symlinks and must remain below `root`'s real path. Returns the joined path (under `root` as
 * given, resolved to an absolute path). `root` must exist.
 */
export async function resolveInside(root: string, rel: string): Promise<string> {
  assertSafeRelativePath(rel, `a path below ${root}`);
  const absoluteRoot = resolve(root);
  let realRoot: string;
  try {
    realRoot = await realpath(absoluteRoot);
  } catch (cause) {
    throw resolveFailed(root, rel, absoluteRoot, cause);
  }
  const target = join(absoluteRoot, ...rel.split("/"));
  let probe = target;
  for (;;) {
    let real: string | undefined;
    try {
      real = await realpath(probe);
    } catch (cause) {
      if ((cause as NodeJS.ErrnoException).code !== "ENOENT") throw resolveFailed(root, rel, probe, cause);
    }
    if (real !== undefined) {
      if (!isInside(realRoot, real)) {
        throw new ManifestError(
          "PATH_ESCAPES_ROOT",
          `resolve ${truncateForMessage(rel)} below ${root}: ${probe} resolves to ${real}, outside the root. ` +
            "A symlink inside the directory points elsewhere; remove it or use another directory.",
          { kind: "refused", file: probe },
        );
      }
      return target;
    }
    // The lexical join cannot climb above the root (no '..'), so walking up ends at the root.
    probe = dirname(probe);
  }
}

function resolveFailed(root: string, rel: string, at: string, cause: unknown): ManifestError {
  const code = (cause as NodeJS.ErrnoException).code ?? "error";
  const missingRoot = at === resolve(root) && code === "ENOENT";
  return new ManifestError(
    missingRoot ? "PATH_ROOT_MISSING" : "PATH_RESOLVE_FAILED",
    `resolve ${truncateForMessage(rel)} below ${root}: ${missingRoot ? "the root does not exist" : `cannot resolve ${at} (${code})`}. ` +
      (missingRoot ? "Create it or pass an existing directory." : "Check permissions."),
    { kind: missingRoot ? "input" : "failed", file: at, cause },
  );
}
