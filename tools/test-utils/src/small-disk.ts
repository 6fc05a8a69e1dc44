import { execFileSync } from "node:child_process";
import { mkdir, open, rm, statfs } from "node:fs/promises";
import { join } from "node:path";

const PAGE = 4096;

// @ckpt/errors has freeBytes, but its own tests use this package: depending on it would be a cycle.
async function freeBytes(dir: string): Promise<number> {
  const { bavail, bsize } = await statfs(dir);
  return bavail * bsize;
}

/**
 * Mounts a tmpfs of `bytes` (rounded up to a page) at `mount`, made here: a disk that fills for
 * real. Returns its unmount. Needs root, which the suites have in CI; a failed mount throws, so
 * the caller fails instead of skipping.
 */
export async function mountTmpfs(mount: string, bytes: number): Promise<() => void> {
  await mkdir(mount);
  const size = Math.ceil(bytes / PAGE) * PAGE;
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0755`, "tmpfs", mount]);
  } catch (error) {
    throw new Error(`cannot mount a ${size}-byte tmpfs at ${mount} (the disk-full suites run as root)`, {
      cause: error,
    });
  }
  return () => execFileSync("umount", [mount]);
}

/**
 * Fills the filesystem holding `dir` until about `leave` bytes stay free (to a page), with one
 * file `name` in `dir`; returns its path, whose removal frees the space again.
 */
export async function fillDisk(dir: string, leave: number, name = ".filler"): Promise<string> {
  const path = join(dir, name);
  const chunk = Buffer.alloc(1 << 20);
  const handle = await open(path, "w");
  try {
    for (;;) {
      const room = (await freeBytes(dir)) - leave;
      if (room < PAGE) break;
      await handle.write(chunk, 0, Math.min(chunk.length, Math.floor(room / PAGE) * PAGE));
      await handle.sync();
    }
  } catch (error) {
    await handle.close();
    await rm(path, { force: true });
    throw error;
  }
  await handle.close();
  return path;
}
