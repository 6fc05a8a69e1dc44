import { lstat, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  STAGED_RECORD,
  fsyncDirectory,
  ManifestError,
  readOwnership,
  removeTemporaries,
  resolveInside,
  type StagedRecord,
} from "@ckpt/manifest";
import { ArchiveReaderError } from "../errors.js";
import type { LocalEntry } from "./plan.js";

// The staging directory a fetch writes into: what is there, whether it is ours, and removing only
// what our record names.

/** Entries scanned below a staging directory; an artifact has at most a few thousand shards. */
const MAX_LOCAL_ENTRIES = 200_000;

/**
 * What the staging directory holds (every file below it, by relative path) and its ownership
 * record; abandoned temporaries of ours are removed first. Refuses a path that is not a directory,
 * more files than any artifact has, and a record that does not parse.
 */
export async function scanLocal(
  stagedDir: string,
): Promise<{ entries: Map<string, LocalEntry>; record: StagedRecord | undefined }> {
  const entries = new Map<string, LocalEntry>();
  let top: Awaited<ReturnType<typeof lstat>>;
  try {
    top = await lstat(stagedDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { entries, record: undefined };
    throw error;
  }
  if (!top.isDirectory()) {
    throw new ArchiveReaderError(
      "READER_STAGE_NOT_DIRECTORY",
      `fetch into ${stagedDir}: it exists and is not a directory. Choose another --dst or move it away.`,
      { kind: "refused", subject: stagedDir },
    );
  }
  // A kill while the ownership record was being written leaves its temporary (writeFileAtomic's
  // name, a writer that is gone): this tool's own file, removed before ownership is judged. Under
  // a record of ours, so is an abandoned temporary of the native manifest (a kill while the
  // staged copy was being completed).
  await removeTemporaries(stagedDir, { target: STAGED_RECORD.fileName });
  // Ours only when the record parses as ours (@ckpt/manifest's ownership rule).
  const { owned } = await readOwnership(stagedDir, STAGED_RECORD.fileName, STAGED_RECORD.parse);
  if (owned) await removeTemporaries(stagedDir, { target: ARTIFACT_MANIFEST.fileName });
  const walk = async (dir: string, rel: string): Promise<void> => {
    for (const dirent of await readdir(dir, { withFileTypes: true })) {
      const path = rel === "" ? dirent.name : `${rel}/${dirent.name}`;
      const full = join(dir, dirent.name);
      if (dirent.isDirectory()) {
        await walk(full, path);
        continue;
      }
      if (entries.size >= MAX_LOCAL_ENTRIES) {
        throw new ArchiveReaderError(
          "READER_STAGE_FOREIGN",
          `fetch into ${stagedDir}: it holds more than ${MAX_LOCAL_ENTRIES} files, more than any artifact. Choose another --dst.`,
          { kind: "refused", subject: stagedDir },
        );
      }
      const info = await lstat(full);
      entries.set(path, { size: info.size, regular: info.isFile() });
    }
  };
  await walk(stagedDir, "");
  const recordEntry = entries.get(STAGED_RECORD.fileName);
  entries.delete(STAGED_RECORD.fileName);
  if (recordEntry === undefined) return { entries, record: undefined };
  try {
    return { entries, record: await STAGED_RECORD.read(join(stagedDir, STAGED_RECORD.fileName)) };
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    throw new ArchiveReaderError(
      "READER_STAGE_RECORD_INVALID",
      `fetch into ${stagedDir}: ${STAGED_RECORD.fileName} is not a valid staging record (${error.message}). ` +
        "ckpt cannot tell which files it owns there; choose another --dst or move the directory away.",
      { kind: "refused", subject: join(stagedDir, STAGED_RECORD.fileName), cause: error },
    );
  }
}

/** The path of `rel` below the staging directory, refused when a symlink there leads outside it. */
export async function insideStage(stagedDir: string, rel: string): Promise<string> {
  try {
    return await resolveInside(stagedDir, rel);
  } catch (error) {
    if (error instanceof ManifestError && error.code === "PATH_ESCAPES_ROOT") {
      throw new ArchiveReaderError(
        "READER_STAGE_FOREIGN",
        `fetch into ${stagedDir}: ${rel} would be written through a symlink leading outside the staging directory (${error.message}). Choose another --dst.`,
        { kind: "refused", subject: rel, cause: error },
      );
    }
    throw error;
  }
}

/** Removes `paths` (below the staging directory, named by our record) and syncs the directory. */
export async function removeOwnedStageFiles(stagedDir: string, paths: readonly string[]): Promise<void> {
  for (const path of paths) await rm(await insideStage(stagedDir, path), { force: true });
  if (paths.length > 0) await fsyncDirectory(stagedDir);
}
