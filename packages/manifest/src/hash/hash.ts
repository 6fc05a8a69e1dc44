import { messageOf } from "@ckpt/errors";
import { createHash } from "node:crypto";
import { lstat, readdir, realpath, stat } from "node:fs/promises";
import { join } from "node:path";
import { ManifestError } from "../errors.js";
import { resolveInside } from "../paths/safe.js";
import {
  abortedError,
  DEFAULT_TUNING,
  type FileDigest,
  type HashOptions,
  type HashTuning,
  hashPlannedFiles,
  type PlannedFile,
} from "./engine.js";

/** SHA-256 of bytes already in memory (a UTF-8 string is hashed as its bytes), lowercase hex. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash("sha256").update(bytes).digest("hex");
}

async function planExplicitFile(path: string): Promise<PlannedFile> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch (error) {
    throw new ManifestError(
      "HASH_READ_FAILED",
      `hash ${path}: ${messageOf(error)}. Check that the file exists and is readable.`,
      { kind: "failed", file: path, cause: error },
    );
  }
  if (!info.isFile()) {
    throw new ManifestError(
      "HASH_SPECIAL_FILE_REFUSED",
      `hash ${path}: it is not a regular file; only regular files can be hashed.`,
      { kind: "refused", file: path },
    );
  }
  return { path, label: path, size: info.size, noFollow: false };
}

/** Streaming SHA-256 of one file. A file that changes while it is read fails with `HASH_FILE_CHANGED`. */
export async function hashFile(path: string, options: HashOptions = {}): Promise<FileDigest> {
  const [digest] = await hashPlannedFiles([await planExplicitFile(path)], options, path);
  return digest!;
}

/**
 * SHA-256 of several files, in parallel across worker threads. Keys are the paths as given.
 * Symbolic links given explicitly are followed; use `hashDirectory` for untrusted trees.
 */
export async function hashFiles(
  paths: readonly string[],
  options: HashOptions = {},
): Promise<Map<string, FileDigest>> {
  return hashFilesTuned(paths, options, DEFAULT_TUNING);
}

/** `hashFiles` with internal tuning, for tests that need worker threads on small files. */
export async function hashFilesTuned(
  paths: readonly string[],
  options: HashOptions,
  tuning: HashTuning,
): Promise<Map<string, FileDigest>> {
  const unique = [...new Set(paths)];
  const planned: PlannedFile[] = [];
  for (const path of unique) planned.push(await planExplicitFile(path));
  const digests = await hashPlannedFiles(planned, options, `${unique.length} files`, tuning);
  return new Map(unique.map((path, index) => [path, digests[index]!]));
}

/** One file of a directory inventory. */
interface DirectoryFileDigest extends FileDigest {
  /** Relative to the directory, POSIX separators. */
  path: string;
}

export interface DirectoryDigest {
  /** Every regular file under the directory, sorted by `path` (code-unit order). */
  files: DirectoryFileDigest[];
  /** Sum of the file sizes. */
  size: number;
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * What a directory walk does with a symbolic link: refuse every one (a link in a checkpoint could
 * point anywhere), or follow a link to a regular file that stays inside the root and refuse the
 * rest (an escape is `PATH_ESCAPES_ROOT`; a link to a directory could loop).
 */
type SymlinkPolicy = "refuse" | "inside";

/**
 * Lists the regular files under `root` as files to hash (`hashPlannedFiles`), refusing special
 * files anywhere inside (a FIFO would block the reader) and symbolic links as `symlinks` says.
 */
export async function planDirectory(
  root: string,
  signal: AbortSignal | undefined,
  symlinks: SymlinkPolicy = "refuse",
): Promise<PlannedFile[]> {
  const files: PlannedFile[] = [];
  const visit = async (relativeDir: string) => {
    if (signal?.aborted) throw abortedError(root);
    const absoluteDir = relativeDir === "" ? root : join(root, relativeDir);
    let names: string[];
    try {
      names = await readdir(absoluteDir);
    } catch (error) {
      throw new ManifestError(
        "HASH_READ_FAILED",
        `hash ${absoluteDir}: ${messageOf(error)}. Check that the directory exists and is readable.`,
        { kind: "failed", file: absoluteDir, cause: error },
      );
    }
    for (const name of names.sort(compareCodeUnits)) {
      const relative = relativeDir === "" ? name : `${relativeDir}/${name}`;
      const absolute = join(absoluteDir, name);
      let info: Awaited<ReturnType<typeof lstat>>;
      try {
        info = await lstat(absolute);
      } catch (error) {
        throw new ManifestError(
          "HASH_READ_FAILED",
          `hash ${absolute}: ${messageOf(error)}. Was it removed while the directory was listed?`,
          { kind: "failed", file: absolute, cause: error },
        );
      }
      if (info.isSymbolicLink() && symlinks === "inside") {
        // Proven inside, then opened by its real path so a link swapped afterwards is not followed.
        const real = await realpath(await resolveInside(root, relative));
        const target = await stat(real);
        if (target.isFile()) {
          files.push({ path: real, label: relative, size: target.size, noFollow: true });
          continue;
        }
      }
      if (info.isSymbolicLink()) {
        throw new ManifestError(
          "HASH_SYMLINK_REFUSED",
          symlinks === "inside"
            ? `hash ${absolute}: it is a symbolic link to something other than a regular file (a linked directory could loop). Replace it with what it points to.`
            : `hash ${absolute}: it is a symbolic link; symbolic links inside a checkpoint are refused so nothing outside it is read. Replace it with the file itself.`,
          { kind: "refused", file: absolute },
        );
      }
      if (info.isDirectory()) await visit(relative);
      else if (info.isFile())
        files.push({ path: absolute, label: relative, size: info.size, noFollow: true });
      else {
        throw new ManifestError(
          "HASH_SPECIAL_FILE_REFUSED",
          `hash ${absolute}: it is not a regular file or directory; only regular files can be hashed.`,
          { kind: "refused", file: absolute },
        );
      }
    }
  };
  await visit("");
  // Per-directory sorting is not a global sort ("a/b" vs "a.txt"), so sort the full paths.
  return files.sort((a, b) => compareCodeUnits(a.label, b.label));
}

/**
 * Inventory of a directory tree: relative POSIX path, size and SHA-256 of every regular file,
 * sorted. Progress events name files by their relative path.
 */
export async function hashDirectory(dir: string, options: HashOptions = {}): Promise<DirectoryDigest> {
  const files = await planDirectory(dir, options.signal);
  const digests = await hashPlannedFiles(files, options, dir);
  return {
    files: files.map((file, index) => ({ path: file.label, ...digests[index]! })),
    size: files.reduce((sum, file) => sum + file.size, 0),
  };
}
