import { lstat, readdir } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import {
  holdsOnlyLockRecord,
  isProcessAlive,
  judgeLockHolder,
  readLockHolder,
  readOwnership,
  STAGED_RECORD,
} from "@ckpt/manifest";
import { PART_SUFFIX } from "@ckpt/archive-reader";
import { FILE_STORE_TEMP_PREFIX, isFileStoreTemporary, type ObjectStore } from "@ckpt/object-store";
import type { GcObservation, SeenEntry } from "./plan.js";

// What `ckpt gc` sees: a walk of a local directory (a file:// store, a fetch destination, a run),
// never following a symbolic link, and a store's incomplete uploads. Nothing is changed here.

const LOCK_SUFFIX = ".lock";

async function seen(path: string): Promise<SeenEntry> {
  const info = await lstat(path);
  return { bytes: info.isFile() ? info.size : 0, mtimeMs: info.mtimeMs, regular: info.isFile() };
}

/** Every file below `dir` by relative path (directories walked, links not followed). */
async function filesBelow(
  dir: string,
  rel = "",
  into = new Map<string, SeenEntry>(),
): Promise<Map<string, SeenEntry>> {
  for (const dirent of await readdir(dir, { withFileTypes: true })) {
    const path = rel === "" ? dirent.name : `${rel}/${dirent.name}`;
    if (dirent.isDirectory()) await filesBelow(join(dir, dirent.name), path, into);
    else into.set(path, await seen(join(dir, dirent.name)));
  }
  return into;
}

async function observeStage(dir: string): Promise<GcObservation> {
  const ownership = await readOwnership(dir, STAGED_RECORD.fileName, STAGED_RECORD.parse);
  const entries = await filesBelow(dir);
  const recordEntry = entries.get(STAGED_RECORD.fileName)!;
  entries.delete(STAGED_RECORD.fileName);
  return ownership.owned
    ? { type: "stage", dir, record: ownership.record, recordEntry, entries }
    : { type: "stage", dir, record: undefined, notOurs: ownership.reason, recordEntry, entries };
}

function observeLock(path: string, mtimeMs: number): GcObservation {
  const holder = readLockHolder(path);
  return {
    type: "lock",
    path,
    holder,
    state: judgeLockHolder(holder, { host: hostname(), alive: isProcessAlive }),
    onlyRecord: holdsOnlyLockRecord(path),
    mtimeMs,
  };
}

/**
 * Walks `root`: a directory holding a `.staged.json` is a stage (not walked further), one named
 * `*.lock` a lock, files named `.ckpt-tmp.*` temporaries and `*.part` partial downloads.
 */
export async function scanDirectory(root: string): Promise<GcObservation[]> {
  const found: GcObservation[] = [];
  const walk = async (dir: string): Promise<void> => {
    const dirents = await readdir(dir, { withFileTypes: true });
    if (dirents.some((d) => d.name === STAGED_RECORD.fileName && !d.isDirectory())) {
      found.push(await observeStage(dir));
      return;
    }
    for (const dirent of dirents.sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, dirent.name);
      if (dirent.isDirectory()) {
        if (dirent.name.endsWith(LOCK_SUFFIX)) found.push(observeLock(path, (await lstat(path)).mtimeMs));
        else await walk(path);
      } else if (dirent.name.startsWith(FILE_STORE_TEMP_PREFIX)) {
        found.push({
          type: "temporary",
          path,
          exactName: isFileStoreTemporary(dirent.name),
          entry: await seen(path),
        });
      } else if (dirent.name.endsWith(PART_SUFFIX)) {
        found.push({ type: "part", path, entry: await seen(path) });
      }
    }
  };
  await walk(root);
  return found;
}

/** The store's incomplete uploads below its prefix; none where the backend lists none. */
export async function scanUploads(store: ObjectStore): Promise<GcObservation[]> {
  const found: GcObservation[] = [];
  if (store.listIncompleteUploads === undefined) return found;
  for await (const upload of store.listIncompleteUploads())
    found.push({ type: "upload", uri: store.uri, upload });
  return found;
}
