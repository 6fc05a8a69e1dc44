import { truncateForMessage } from "@ckpt/errors";
import { ManifestError } from "../errors.js";
import { formatIterDir, parseIterDir } from "../layout/iter.js";
import { decodeUtf8, readBoundedFile } from "./common.js";
import { LATEST_CHECKPOINT_FILE } from "./names.js";

/** Largest pointer file read: it holds one short directory name. */
const MAX_LATEST_POINTER_BYTES = 1024;

/** What `latest_checkpoint.txt` points at: the iteration directory name and its number. */
export interface LatestPointer {
  iterDirName: string;
  iteration: number;
}

/**
 * Parses `latest_checkpoint.txt`: one `iter_<digits>` name, optionally followed by one newline
 * (writers differ on that). Anything else is refused, so a damaged pointer never selects a resume.
 */
function parseLatestPointer(bytes: Uint8Array, name: string = LATEST_CHECKPOINT_FILE): LatestPointer {
  const text = bytes.byteLength > MAX_LATEST_POINTER_BYTES ? undefined : decodeUtf8(bytes, name);
  const line = text?.endsWith("\n") ? text.slice(0, -1) : text;
  const iteration = line === undefined ? undefined : parseIterDir(line);
  if (line === undefined || iteration === undefined) {
    throw new ManifestError(
      "RECORD_BAD_POINTER",
      `read ${name}: expected one iteration directory name like iter_000000100, found ` +
        `${line === undefined ? `${bytes.byteLength} bytes` : truncateForMessage(line)}. ` +
        "Rewrite the pointer or resume from an explicit iteration.",
      { kind: "input", file: name },
    );
  }
  return { iterDirName: line, iteration };
}

async function readLatestPointer(path: string): Promise<LatestPointer> {
  return parseLatestPointer(await readBoundedFile(path, MAX_LATEST_POINTER_BYTES), path);
}

/** The pointer's bytes for an iteration: the 9-digit directory name, no trailing newline (as i4 writes it). */
function serializeLatestPointer(iteration: number): Uint8Array {
  return new TextEncoder().encode(formatIterDir(iteration));
}

/** The resume pointer `latest_checkpoint.txt`: one line of text, not a JSON record. */
export const LATEST_POINTER = {
  fileName: LATEST_CHECKPOINT_FILE,
  parse: parseLatestPointer,
  read: readLatestPointer,
  serialize: serializeLatestPointer,
} as const;
