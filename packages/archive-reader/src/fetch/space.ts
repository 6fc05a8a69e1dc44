import { describeShortfall, describeUnfinishedWrite, raiseNoSpace, spaceShortfall } from "@ckpt/errors";
import { ArchiveReaderError } from "../errors.js";
import { PART_SUFFIX, type FetchPlan, type LocalEntry } from "./plan.js";

// A full disk under the staging directory: refused before anything is written when the sizes say
// it will not fit, and coded when it fills up half way.

/** The closing words of every READER_NO_SPACE message. */
const NO_SPACE_REMEDY = "Nothing under the final name changed; free space and run the same fetch again.";

/**
 * Bytes a fetch planned as `plan` still has to write below the staging directory: what is left
 * of each download (a kept `.part` is on disk already), the native manifest when it is written,
 * and the record (`recordBytes`, written atomically beside the old one), less what removing the
 * previous source's files frees first. Never negative. Pure.
 */
export function fetchSpaceNeeded(
  plan: FetchPlan,
  manifestBytes: number,
  recordBytes: number,
  entries: ReadonlyMap<string, LocalEntry>,
): number {
  const downloads = plan.download.reduce((sum, f) => sum + f.size - f.resumeFrom, 0);
  const manifest = plan.writeManifest ? manifestBytes : 0;
  const freed = plan.remove.reduce((sum, path) => sum + (entries.get(path)?.size ?? 0), 0);
  return Math.max(0, downloads + manifest + recordBytes - freed);
}

/** Refuses a fetch whose remaining bytes do not fit the staging directory's filesystem, before anything is written. */
export async function refuseShortfall(uri: string, stagedDir: string, needed: number): Promise<void> {
  const shortfall = await spaceShortfall(stagedDir, needed);
  if (shortfall === undefined) return;
  throw new ArchiveReaderError(
    "READER_NO_SPACE",
    `fetch ${uri}: not enough space to stage it: ${describeShortfall(shortfall)}. Nothing was written. ${NO_SPACE_REMEDY}`,
    { kind: "failed", subject: stagedDir },
  );
}

/**
 * Runs one write of the fetch (`bytes` to `path`); a full disk met half way (ENOSPC, EDQUOT) is
 * READER_NO_SPACE naming the path and the bytes still to write. Our own errors pass as they are:
 * one already coded READER_NO_SPACE keeps its own words.
 */
export function writing<T>(uri: string, path: string, bytes: number, write: () => Promise<T>): Promise<T> {
  return raiseNoSpace(write, (cause) =>
    cause instanceof ArchiveReaderError ? cause : noSpaceWriting(uri, path, bytes, cause),
  );
}

/** READER_NO_SPACE for `bytes` still to write to `path` when the disk filled up. */
export function noSpaceWriting(uri: string, path: string, bytes: number, cause: unknown): ArchiveReaderError {
  const part = path.endsWith(PART_SUFFIX) ? ` The ${PART_SUFFIX} was removed to give its space back.` : "";
  return new ArchiveReaderError(
    "READER_NO_SPACE",
    `fetch ${uri}: ${describeUnfinishedWrite(path, bytes)}.${part} ` +
      `The staging stays incomplete (.staged.json says so) and keeps every verified file. ${NO_SPACE_REMEDY}`,
    { kind: "failed", subject: path, cause },
  );
}
