import { describeShortfall, describeUnfinishedWrite, raiseNoSpace, spaceShortfall } from "@ckpt/errors";
import { MergeError } from "../errors.js";

/** MERGE_NO_SPACE: what was being written and why it did not fit, and that the output is unchanged. */
export function noSpace(words: string, path: string, cause?: unknown): MergeError {
  return new MergeError(
    "MERGE_NO_SPACE",
    `merge: ${words}; nothing under the final name changed; free space and run again.`,
    { kind: "failed", file: path, ...(cause === undefined ? {} : { cause }) },
  );
}

/** Refuses before anything is touched when `needed` bytes will not fit where `path` is written. */
export async function assertRoom(what: string, path: string, needed: number): Promise<void> {
  const shortfall = await spaceShortfall(path, needed);
  if (shortfall !== undefined) throw noSpace(`${what}: ${describeShortfall(shortfall)}`, path);
}

/**
 * Runs one write step of the build; a full disk met while it writes becomes MERGE_NO_SPACE naming
 * the file and the bytes it still had to write (the step's own temporary is already gone).
 */
export function writeStep<T>(path: string, remaining: () => number, write: () => Promise<T>): Promise<T> {
  return raiseNoSpace(write, (cause) => noSpace(describeUnfinishedWrite(path, remaining()), path, cause));
}
