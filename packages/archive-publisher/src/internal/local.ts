import { lstat } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import {
  type DirectoryDigest,
  type FileDigest,
  hashDirectory,
  hashFiles,
  parseIterDir,
} from "@ckpt/manifest";
import { ArchivePublisherError, kindOf, messageOf } from "../errors.js";

/**
 * The absolute directory and the iteration its `iter_<digits>` name carries; any other name is
 * `code` (kind input), its message `<verb> <dir>: … <remedy>`.
 */
export function iterDirOf(
  dir: string,
  code: "COMMIT_NOT_ITER_DIR" | "PUBLISH_NOT_ITER_DIR" | "FULL_UPLOAD_NOT_ITER_DIR",
  verb: string,
  remedy: string,
): { root: string; iteration: number } {
  const root = resolve(dir);
  const iteration = parseIterDir(basename(root));
  if (iteration === undefined) {
    throw new ArchivePublisherError(
      code,
      `${verb} ${root}: the directory is not named iter_<digits>. ${remedy}`,
      { kind: "input", subject: root },
    );
  }
  return { root, iteration };
}

/** What a path inside an artifact directory is. Symbolic links and special files are refused by the hashers. */
export async function entryKind(path: string): Promise<"file" | "dir" | "other" | "absent"> {
  try {
    const info = await lstat(path);
    if (info.isFile()) return "file";
    if (info.isDirectory()) return "dir";
    return "other";
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "absent";
    throw new ArchivePublisherError(
      "PUBLISH_LOCAL_READ_FAILED",
      `inspect ${path}: ${messageOf(error)}. Check that it is readable.`,
      { kind: "failed", subject: path, cause: error },
    );
  }
}

/** Progress of hashing: bytes done of the current batch (the files together, then each directory). */
export interface HashEvent {
  type: "hash";
  path: string;
  doneBytes: number;
  totalBytes: number;
}

export interface HashRequest {
  /** Absolute file paths to hash. */
  files: string[];
  /** Absolute directory paths whose whole tree is hashed. */
  dirs: string[];
}

export interface HashResult {
  files: Map<string, FileDigest>;
  dirs: Map<string, DirectoryDigest>;
}

/**
 * Hashes files (in parallel) and directory trees, reporting one running byte count. Hashing
 * errors (a symbolic link, a file changing while read) become PUBLISH_LOCAL_READ_FAILED.
 */
export async function hashLocal(
  request: HashRequest,
  emit: (event: HashEvent) => void,
  signal: AbortSignal | undefined,
): Promise<HashResult> {
  const onProgress = (event: { path: string; doneBytes: number; totalBytes: number }) =>
    emit({ type: "hash", path: event.path, doneBytes: event.doneBytes, totalBytes: event.totalBytes });
  try {
    const files =
      request.files.length === 0
        ? new Map<string, FileDigest>()
        : await hashFiles(request.files, { onProgress, ...(signal ? { signal } : {}) });
    const dirs = new Map<string, DirectoryDigest>();
    for (const dir of request.dirs) {
      const digest = await hashDirectory(dir, {
        onProgress: (event) => onProgress({ ...event, path: join(dir, event.path) }),
        ...(signal ? { signal } : {}),
      });
      dirs.set(dir, digest);
    }
    return { files, dirs };
  } catch (error) {
    if (error instanceof ArchivePublisherError) throw error;
    const subject = (error as { file?: string }).file;
    throw new ArchivePublisherError(
      signal?.aborted ? "PUBLISH_ABORTED" : "PUBLISH_LOCAL_READ_FAILED",
      `hash ${subject ?? "artifact files"}: ${messageOf(error)}`,
      { kind: signal?.aborted ? "failed" : kindOf(error), ...(subject ? { subject } : {}), cause: error },
    );
  }
}
