import { readdir } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import {
  CHECKPOINT_ARTIFACTS_DIR,
  CHECKPOINTS_DIR,
  compareCodePoints,
  type DirectoryDigest,
  type FileDigest,
  hashDirectory,
  hashFiles,
  parseIterDir,
  pathInfo,
} from "@ckpt/manifest";
import { ArchivePublisherError, kindOf, messageOf } from "../errors.js";

/**
 * The absolute directory and the iteration its `iter_<digits>` name carries; any other name is
 * `code` (kind input), its message `<verb> <dir>: … <remedy>`. An artifact command passes
 * `fullCheckpointCode`: a full checkpoint (`checkpoints/iter_*`) is then refused with it, pointing
 * to the way a full checkpoint is archived (made an artifact, resume would refuse the run).
 */
export function iterDirOf(
  dir: string,
  code: "COMMIT_NOT_ITER_DIR" | "PUBLISH_NOT_ITER_DIR" | "FULL_UPLOAD_NOT_ITER_DIR",
  verb: string,
  remedy: string,
  fullCheckpointCode?: "COMMIT_FULL_CHECKPOINT" | "PUBLISH_FULL_CHECKPOINT",
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
  if (fullCheckpointCode !== undefined && basename(dirname(root)) === CHECKPOINTS_DIR) {
    throw new ArchivePublisherError(
      fullCheckpointCode,
      `${verb} ${root}: this is a full checkpoint (${CHECKPOINTS_DIR}/iter_*), not an artifact. ` +
        "A full checkpoint is archived by the checkpoint manager's upload (upload.enabled, bucket and " +
        "credentials in its config), which copies every file and writes its .uploaded receipt; " +
        `artifact commands take ${CHECKPOINT_ARTIFACTS_DIR}/iter_* directories the manager saved as artifacts.`,
      { kind: "input", subject: root },
    );
  }
  return { root, iteration };
}

/** What a path inside an artifact directory is. Symbolic links and special files are refused by the hashers. */
export async function entryKind(path: string): Promise<"file" | "dir" | "other" | "absent"> {
  return (await entryInfo(path)).kind;
}

/** {@link entryKind}, with the size of a regular file. */
export async function entryInfo(
  path: string,
): Promise<{ kind: "file" | "dir" | "other" | "absent"; size: number }> {
  try {
    return await pathInfo(path);
  } catch (error) {
    throw new ArchivePublisherError(
      "PUBLISH_LOCAL_READ_FAILED",
      `inspect ${path}: ${messageOf(error)}. Check that it is readable.`,
      { kind: "failed", subject: path, cause: error },
    );
  }
}

/**
 * Every file below `root` with its size (relative POSIX paths, sorted), read from the directory
 * entries alone. Anything but a regular file or a directory (a symbolic link, a FIFO) is refused,
 * as the hashers refuse it.
 */
export async function listTree(root: string): Promise<Array<{ path: string; size: number }>> {
  const out: Array<{ path: string; size: number }> = [];
  const visit = async (relative: string): Promise<void> => {
    const absolute = relative === "" ? root : join(root, relative);
    let names: string[];
    try {
      names = await readdir(absolute);
    } catch (error) {
      throw new ArchivePublisherError(
        "PUBLISH_LOCAL_READ_FAILED",
        `list ${absolute}: ${messageOf(error)}. Check that it is readable.`,
        { kind: "failed", subject: absolute, cause: error },
      );
    }
    for (const name of names) {
      const child = relative === "" ? name : `${relative}/${name}`;
      const entry = await entryInfo(join(root, child));
      if (entry.kind === "dir") await visit(child);
      else if (entry.kind === "file") out.push({ path: child, size: entry.size });
      else if (entry.kind === "other") {
        throw new ArchivePublisherError(
          "PUBLISH_LOCAL_READ_FAILED",
          `inspect ${join(root, child)}: it is not a regular file (a symbolic link or a special file); an artifact holds only files. Replace it with the file itself.`,
          { kind: "refused", subject: join(root, child) },
        );
      }
    }
  };
  await visit("");
  return out.sort((a, b) => compareCodePoints(a.path, b.path));
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
