import { copyFile, lstat, mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDirectory, fsyncFile, hashFile, sha256Hex } from "@ckpt/manifest";
import type { BasePreflight } from "../preflight/base.js";
import { TEMPLATE_DIR } from "../preflight/templates.js";

/** A sidecar being copied from the base, before the rename that replaces the staged copy. */
const COPYING_SUFFIX = ".copying";
/** A unified template file being written from the plan, before its rename. */
const WRITING_SUFFIX = ".writing";
/** The staged template directory moved aside while its fresh copy is renamed into place. */
const REPLACED_SUFFIX = ".replaced";

/** What a staged sidecar should hold: the base file's bytes, or a unified template file's planned bytes. */
interface Wanted {
  readonly path: string;
  readonly sha256: string;
  /** Written from the plan (`.writing`); else copied from the base (`.copying`). */
  readonly bytes: Uint8Array | undefined;
}

function wantedSidecars(base: BasePreflight): Wanted[] {
  const planned = new Map(base.unified?.files.map((f) => [f.path, f.bytes]) ?? []);
  return base.sidecars.map((file) => {
    const bytes = planned.get(file.path);
    return { path: file.path, sha256: bytes === undefined ? file.sha256 : sha256Hex(bytes), bytes };
  });
}

const local = (dir: string, path: string) => join(dir, ...path.split("/"));

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return false;
      throw error;
    },
  );
}

async function holds(path: string, sha256: string): Promise<boolean> {
  const digest = await hashFile(path).catch(() => undefined);
  return digest?.sha256 === sha256;
}

/**
 * Re-syncs the sidecars of a complete staged build (`<out>.tmp`) inherited from an earlier run
 * from the base, before it is checked and published: every sidecar (config.json included) that is
 * missing or differs is copied from the base to `<file>.copying` (a unified template file written
 * from the plan to `<file>.writing`), fsynced and renamed over the staged copy; a template
 * directory that differs is copied whole to `additional_chat_templates.copying/`, and swapped in by
 * two renames (the old one to `.replaced`, the copy into place, then `.replaced` removed). Shards,
 * the index and the marker are never touched. A run killed at any point leaves a state the next
 * re-sync completes: it first removes the temporaries and copies left behind and renames a
 * `.replaced` directory back when the directory itself is missing. Returns what was repaired.
 */
export async function resyncStagedSidecars(staged: string, base: BasePreflight): Promise<string[]> {
  const repaired: string[] = [];
  const wanted = wantedSidecars(base);
  await settleInterrupted(staged, wanted, repaired);
  const inDir = (w: Wanted) => w.path.startsWith(`${TEMPLATE_DIR}/`);
  for (const file of wanted.filter((w) => !inDir(w))) {
    const target = local(staged, file.path);
    if (await holds(target, file.sha256)) continue;
    const temporary = `${target}${file.bytes === undefined ? COPYING_SUFFIX : WRITING_SUFFIX}`;
    if (file.bytes === undefined) await copyFile(local(base.dir, file.path), temporary);
    else await writeFile(temporary, file.bytes);
    await fsyncFile(temporary);
    await rename(temporary, target);
    await fsyncDirectory(staged);
    repaired.push(file.path);
  }
  const templates = wanted.filter(inDir);
  if (templates.length > 0 && !(await templateDirMatches(staged, templates))) {
    await replaceTemplateDir(staged, base.dir, templates);
    repaired.push(`${TEMPLATE_DIR}/`);
  }
  return repaired;
}

/** Clears what an interrupted re-sync left: temporaries, a partial directory copy, a directory moved aside. */
async function settleInterrupted(
  staged: string,
  wanted: readonly Wanted[],
  repaired: string[],
): Promise<void> {
  for (const file of wanted) {
    for (const suffix of [COPYING_SUFFIX, WRITING_SUFFIX]) {
      const temporary = `${local(staged, file.path)}${suffix}`;
      if (await exists(temporary)) {
        await rm(temporary, { force: true });
        repaired.push(`removed ${file.path}${suffix}`);
      }
    }
  }
  const dir = join(staged, TEMPLATE_DIR);
  const copying = `${dir}${COPYING_SUFFIX}`;
  const replaced = `${dir}${REPLACED_SUFFIX}`;
  if (await exists(copying)) {
    await rm(copying, { recursive: true, force: true });
    repaired.push(`removed ${TEMPLATE_DIR}${COPYING_SUFFIX}/`);
  }
  if (await exists(replaced)) {
    if (await exists(dir)) {
      await rm(replaced, { recursive: true, force: true });
      repaired.push(`removed ${TEMPLATE_DIR}${REPLACED_SUFFIX}/`);
    } else {
      await rename(replaced, dir);
      repaired.push(`renamed ${TEMPLATE_DIR}${REPLACED_SUFFIX}/ back`);
    }
  }
  await fsyncDirectory(staged);
}

async function templateDirMatches(staged: string, templates: readonly Wanted[]): Promise<boolean> {
  const names = await readdir(join(staged, TEMPLATE_DIR)).catch(() => undefined);
  if (names === undefined || names.length !== templates.length) return false;
  for (const file of templates) if (!(await holds(local(staged, file.path), file.sha256))) return false;
  return true;
}

async function replaceTemplateDir(
  staged: string,
  baseDir: string,
  templates: readonly Wanted[],
): Promise<void> {
  const dir = join(staged, TEMPLATE_DIR);
  const copying = `${dir}${COPYING_SUFFIX}`;
  await mkdir(copying);
  for (const file of templates) {
    const target = join(copying, file.path.slice(TEMPLATE_DIR.length + 1));
    await copyFile(local(baseDir, file.path), target);
    await fsyncFile(target);
  }
  await fsyncDirectory(copying);
  const hadDir = await exists(dir);
  if (hadDir) await rename(dir, `${dir}${REPLACED_SUFFIX}`);
  await rename(copying, dir);
  await fsyncDirectory(staged);
  if (hadDir) {
    await rm(`${dir}${REPLACED_SUFFIX}`, { recursive: true, force: true });
    await fsyncDirectory(staged);
  }
}
