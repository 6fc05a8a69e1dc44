import type { ObjectStore } from "@ckpt/object-store";
import { decideGc } from "./plan.js";
import { scanDirectory, scanUploads } from "./scan.js";

/** What ckpt left beside an archive, as `artifact verify` mentions it. */
export interface Leftovers {
  readonly count: number;
  readonly bytes: number;
  /** The command that lists them (and with --apply removes them). */
  readonly gc: string;
}

/**
 * The leftovers of ckpt's own (whatever their age) in an archive: a file:// archive's directory
 * is walked, a remote store's incomplete uploads listed. `dir` is the archive's directory for
 * file://, else undefined.
 */
export async function leftoversOf(store: ObjectStore, dir: string | undefined): Promise<Leftovers> {
  const observations = dir === undefined ? await scanUploads(store) : await scanDirectory(dir);
  const found = decideGc(observations, { olderThanMs: 0, nowMs: Date.now() }).filter(
    (i) => i.action !== "keep",
  );
  return {
    count: found.length,
    bytes: found.reduce((sum, i) => sum + i.bytes, 0),
    gc: `ckpt gc ${dir ?? store.uri}`,
  };
}
