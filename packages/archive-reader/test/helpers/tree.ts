import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";

/** Every entry below `dir` with its bytes (files) or target (symlinks), to compare before and after. */
export async function snapshotTree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (path: string, rel: string): Promise<void> => {
    for (const name of (await readdir(path)).sort()) {
      const full = join(path, name);
      const key = rel === "" ? name : `${rel}/${name}`;
      const info = await lstat(full);
      if (info.isDirectory()) {
        out[`${key}/`] = "dir";
        await walk(full, key);
      } else if (info.isSymbolicLink()) out[key] = `-> ${await readlink(full)}`;
      else out[key] = (await readFile(full)).toString("base64");
    }
  };
  await walk(dir, "");
  return out;
}
