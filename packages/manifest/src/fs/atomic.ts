import { messageOf } from "@ckpt/errors";
import { createHash, randomBytes } from "node:crypto";
import { type FileHandle, lstat, open, readdir, rename, rm } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { ManifestError, type ManifestErrorCode } from "../errors.js";
import { writeFully } from "./write-fully.js";

/**
 * What `writeFileAtomic` writes: bytes, a UTF-8 string, or chunks from a (possibly async) source,
 * so large payloads need not sit in memory. A source that throws aborts the write and leaves the
 * target untouched.
 */
export type AtomicWriteData = Uint8Array | string | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

export interface WriteFileAtomicOptions {
  /** Read the temporary back after fsync and compare its SHA-256 with what was written; throws `FS_VERIFY_MISMATCH`. */
  verify?: boolean;
  /** File mode of the result, applied exactly (not masked by the umask). Default: 0o666 minus the umask. */
  mode?: number;
  /**
   * Runs once the temporary is written and durable, before verification and rename. It is the
   * seam for callers that must touch the temporary (times, extended attributes) and for tests
   * that simulate storage returning other bytes than were written.
   */
  beforeCommit?: (tempPath: string) => void | Promise<void>;
  /** Fsync the parent directory after the rename (default true). `commitLast` batches it instead. */
  fsyncDirectory?: boolean;
}

export interface AtomicWriteResult {
  path: string;
  size: number;
  sha256: string;
}

// ".<name>.tmp-<pid>-<12 hex>": a leading dot hides it from listings that skip dotfiles, and the
// fixed shape lets `findTemporaries` recognise exactly what this tool created and nothing else.
const TEMP_PATTERN = /^\.(.+)\.tmp-(\d+)-([0-9a-f]{12})$/;

/** True when `name` (a file name, not a path) has the shape of this tool's atomic-write temporaries. */
export function isAtomicTemporary(name: string): boolean {
  return TEMP_PATTERN.test(name);
}

/** The temporary name used for `target`, in the same directory so the final rename is atomic. */
export function temporaryPathFor(target: string): string {
  return join(dirname(target), `.${basename(target)}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`);
}

function failed(code: ManifestErrorCode, message: string, file: string, cause?: unknown): ManifestError {
  return new ManifestError(code, message, { kind: "failed", file, cause });
}

/** Fsyncs a directory so a rename or create inside it survives a crash. */
export async function fsyncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (error) {
    // Some filesystems (certain FUSE and network mounts) cannot fsync a directory; there the
    // rename is as durable as the filesystem allows, so this is not an error.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EINVAL" || code === "ENOTSUP" || code === "EISDIR") return;
    throw failed(
      "FS_FSYNC_FAILED",
      `fsync directory ${dir}: ${messageOf(error)}. Check that it exists and is writable.`,
      dir,
      error,
    );
  } finally {
    await handle?.close();
  }
}

/** Fsyncs an existing file's data and metadata. */
export async function fsyncFile(path: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(path, "r+");
    await handle.sync();
  } catch (error) {
    throw failed(
      "FS_FSYNC_FAILED",
      `fsync ${path}: ${messageOf(error)}. Check that the file exists and is writable.`,
      path,
      error,
    );
  } finally {
    await handle?.close();
  }
}

async function* chunksOf(data: AtomicWriteData): AsyncGenerator<Uint8Array> {
  if (typeof data === "string") yield Buffer.from(data, "utf8");
  else if (data instanceof Uint8Array) yield data;
  else yield* data;
}

async function sha256OfFile(path: string): Promise<string> {
  const handle = await open(path, "r");
  try {
    const hash = createHash("sha256");
    const buffer = Buffer.allocUnsafe(4 * 1024 * 1024);
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
    }
    return hash.digest("hex");
  } finally {
    await handle.close();
  }
}

/**
 * Writes `path` so that a crash at any instant leaves either the old content or the new one:
 * temporary in the same directory, write, fsync, rename over the target, fsync the directory.
 * On failure the temporary is removed and the target is untouched.
 */
export async function writeFileAtomic(
  path: string,
  data: AtomicWriteData,
  options: WriteFileAtomicOptions = {},
): Promise<AtomicWriteResult> {
  const temp = temporaryPathFor(path);
  const hash = createHash("sha256");
  let size = 0;
  let handle: FileHandle | undefined;
  try {
    try {
      handle = await open(temp, "wx", options.mode ?? 0o666);
      for await (const chunk of chunksOf(data)) {
        hash.update(chunk);
        await writeFully(handle, chunk, size);
        size += chunk.length;
      }
      if (options.mode !== undefined) await handle.chmod(options.mode);
      await handle.sync();
      await handle.close();
      handle = undefined;
    } catch (error) {
      throw failed(
        "FS_WRITE_FAILED",
        `write ${path}: ${messageOf(error)}. The previous content, if any, is unchanged.`,
        path,
        error,
      );
    }
    const sha256 = hash.digest("hex");
    await options.beforeCommit?.(temp);
    if (options.verify) {
      const onDisk = await sha256OfFile(temp);
      if (onDisk !== sha256) {
        throw failed(
          "FS_VERIFY_MISMATCH",
          `verify ${path}: read back sha256 ${onDisk} but wrote ${sha256}. The storage returned other bytes than were written; the previous content, if any, is unchanged.`,
          path,
        );
      }
    }
    try {
      await rename(temp, path);
    } catch (error) {
      throw failed(
        "FS_WRITE_FAILED",
        `rename ${temp} to ${path}: ${messageOf(error)}. The previous content, if any, is unchanged.`,
        path,
        error,
      );
    }
    if (options.fsyncDirectory !== false) await fsyncDirectory(dirname(path));
    return { path, size, sha256 };
  } catch (error) {
    await handle?.close().catch(() => {});
    await rm(temp, { force: true }).catch(() => {});
    throw error;
  }
}

/** A payload for `commitLast`: bytes to write atomically, or a file the caller already wrote. */
export type CommitPayload = { path: string; data: AtomicWriteData } | { path: string; written: true };

export interface CommitLastOptions {
  /** Verify every file this call writes (see `WriteFileAtomicOptions.verify`). */
  verify?: boolean;
}

/**
 * Commit-last ordering: writes (or fsyncs, when the caller already wrote them) every payload,
 * fsyncs each directory involved, and only then writes the commit record atomically. A reader that
 * trusts only committed data therefore never sees a commit record pointing at missing payload.
 */
export async function commitLast(
  payloads: readonly CommitPayload[],
  commit: { path: string; data: AtomicWriteData },
  options: CommitLastOptions = {},
): Promise<AtomicWriteResult> {
  const dirs = new Set<string>();
  for (const payload of payloads) {
    if ("written" in payload) {
      await fsyncFile(payload.path);
    } else {
      await writeFileAtomic(payload.path, payload.data, {
        verify: options.verify,
        fsyncDirectory: false,
      });
    }
    dirs.add(dirname(resolve(payload.path)));
  }
  for (const dir of dirs) await fsyncDirectory(dir);
  return writeFileAtomic(commit.path, commit.data, { verify: options.verify });
}

export interface TemporaryFile {
  /** Absolute path of the temporary. */
  path: string;
  /** Name of the file it was meant to become. */
  target: string;
  /** Process id that created it. */
  pid: number;
}

/** Leftover temporaries of `writeFileAtomic` directly inside `dir` (not recursive), sorted by name. */
export async function findTemporaries(dir: string): Promise<TemporaryFile[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    throw failed("FS_LIST_FAILED", `list ${dir}: ${messageOf(error)}.`, dir, error);
  }
  const found: TemporaryFile[] = [];
  for (const name of names.sort()) {
    const match = TEMP_PATTERN.exec(name);
    if (match) found.push({ path: join(resolve(dir), name), target: match[1]!, pid: Number(match[2]) });
  }
  return found;
}

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

export interface RemoveTemporariesOptions {
  /**
   * Decides whether a temporary is abandoned. Default: its creating process is not running on this
   * host, so a write in progress is never broken. Pass `() => true` when no writer can be running
   * (for example on a shared filesystem after every trainer has stopped).
   */
  isAbandoned?: (temp: TemporaryFile) => boolean;
  /** Only temporaries meant to become this file name (e.g. one record), leaving every other alone. */
  target?: string;
}

/** Removes abandoned temporaries of this tool directly inside `dir`; returns the removed ones. */
export async function removeTemporaries(
  dir: string,
  options: RemoveTemporariesOptions = {},
): Promise<TemporaryFile[]> {
  const isAbandoned = options.isAbandoned ?? ((temp: TemporaryFile) => !processIsAlive(temp.pid));
  const removed: TemporaryFile[] = [];
  for (const temp of await findTemporaries(dir)) {
    if (options.target !== undefined && temp.target !== options.target) continue;
    if (!isAbandoned(temp)) continue;
    try {
      // Only regular files: something else with this name was not made by writeFileAtomic.
      if (!(await lstat(temp.path)).isFile()) continue;
      await rm(temp.path, { force: true });
    } catch (error) {
      throw failed(
        "FS_REMOVE_FAILED",
        `remove temporary ${temp.path}: ${messageOf(error)}.`,
        temp.path,
        error,
      );
    }
    removed.push(temp);
  }
  return removed;
}
