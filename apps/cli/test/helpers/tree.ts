import { createHash } from "node:crypto";
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";

/** A digest of every path below `root` with its kind and bytes (a link's target): equal means byte-identical. */
export async function treeDigest(root: string): Promise<string> {
  const hash = createHash("sha256");
  const walk = async (dir: string, rel: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const path = join(dir, name);
      const info = await lstat(path);
      const at = `${rel}/${name}`;
      if (info.isDirectory()) {
        hash.update(`d ${at}\n`);
        await walk(path, at);
      } else if (info.isSymbolicLink()) hash.update(`l ${at} -> ${await readlink(path)}\n`);
      else hash.update(`f ${at} ${info.size}\n`).update(await readFile(path));
    }
  };
  await walk(root, "");
  return hash.digest("hex");
}
