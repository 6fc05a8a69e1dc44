import { rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fsyncDirectory, pathKind, renameDurably } from "@ckpt/manifest";
import { DELETING_SUFFIX } from "@ckpt/retention";

/** What a path is, without following a symbolic link (@ckpt/manifest's one classifier). */
export const entryKind = pathKind;

/**
 * Removes a file or directory tree this manager owns: a directory is renamed aside first (the
 * dot name retention also uses), so it vanishes at once and a crash leaves a recognisable name.
 */
export async function removeOwned(path: string): Promise<boolean> {
  const kind = await entryKind(path);
  if (kind === "absent") return false;
  const parent = dirname(path);
  if (kind === "dir") {
    const aside = join(parent, `.${basename(path)}${DELETING_SUFFIX}`);
    await rm(aside, { recursive: true, force: true });
    await renameDurably(path, aside);
    await rm(aside, { recursive: true, force: true });
  } else {
    await rm(path, { force: true });
  }
  await fsyncDirectory(parent);
  return true;
}
