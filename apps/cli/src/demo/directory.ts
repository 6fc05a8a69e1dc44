// The demo directory is the demo's own: a marker file written when the demo creates it is the
// proof. A directory without the marker is refused (the demo never writes into, or deletes from, a
// directory it did not create), and `--clean` removes only the entries the demo makes.
import { mkdir, readdir, readFile, rm, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DemoError } from "./errors.js";

export const DEMO_MARKER_FILE = ".ckpt-demo.json";
const DEMO_MARKER_SCHEMA = "ckpt.demo-marker.v1";
/** Everything the demo writes below its directory (besides the marker). */
const DEMO_ENTRIES = ["runs", "archive", "stage", "hf-base", "merge", "hf-model"] as const;

async function entriesOf(dir: string): Promise<string[] | undefined> {
  try {
    return await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

async function hasMarker(dir: string): Promise<boolean> {
  try {
    const record = JSON.parse(await readFile(join(dir, DEMO_MARKER_FILE), "utf8")) as { schema?: unknown };
    return record.schema === DEMO_MARKER_SCHEMA;
  } catch {
    return false;
  }
}

function notOurs(dir: string, action: string): DemoError {
  return new DemoError(
    "DEMO_DIR_NOT_OURS",
    `${action} ${dir}: the directory exists and has no ${DEMO_MARKER_FILE}, so ckpt demo did not create it and will not touch it. ` +
      "Pass --dir with a path that does not exist yet.",
    "input",
  );
}

/**
 * Makes `dir` ready for a run: creates it with the marker, or, when the marker shows an earlier
 * demo made it, removes that run's entries. Returns whether it was created now.
 */
export async function prepareDemoDir(dir: string): Promise<"created" | "reused"> {
  const entries = await entriesOf(dir);
  if (entries === undefined) {
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, DEMO_MARKER_FILE),
      `${JSON.stringify({ schema: DEMO_MARKER_SCHEMA, created_by: "ckpt demo", created_at: new Date().toISOString() }, null, 2)}\n`,
    );
    return "created";
  }
  if (!(await hasMarker(dir))) throw notOurs(dir, "run the demo in");
  await removeDemoEntries(dir);
  return "reused";
}

async function removeDemoEntries(dir: string): Promise<void> {
  for (const name of DEMO_ENTRIES) await rm(join(dir, name), { recursive: true, force: true });
}

/** What `--clean` removes (the demo's entries present) and what it keeps (anything else). Pure. */
function planDemoClean(entries: readonly string[]): { remove: string[]; left: string[] } {
  const ours = new Set<string>(DEMO_ENTRIES);
  const present = entries.filter((n) => n !== DEMO_MARKER_FILE);
  return { remove: present.filter((n) => ours.has(n)), left: present.filter((n) => !ours.has(n)) };
}

/**
 * `--clean`: removes what the demo made; the directory goes too when nothing else is left. With
 * `dryRun` the same decision is returned and nothing is touched.
 */
export async function cleanDemoDir(
  dir: string,
  options: { dryRun?: boolean } = {},
): Promise<{ removed: boolean; left: string[]; would_remove?: string[]; dry_run?: true }> {
  const entries = await entriesOf(dir);
  if (entries === undefined) {
    throw new DemoError("DEMO_DIR_MISSING", `clean ${dir}: there is no such directory.`, "input");
  }
  if (!(await hasMarker(dir))) throw notOurs(dir, "clean");
  const plan = planDemoClean(entries);
  if (options.dryRun) return { dry_run: true, removed: false, would_remove: plan.remove, left: plan.left };
  await removeDemoEntries(dir);
  const left = ((await entriesOf(dir)) ?? []).filter((n) => n !== DEMO_MARKER_FILE);
  if (left.length > 0) return { removed: false, left };
  await rm(join(dir, DEMO_MARKER_FILE));
  await rmdir(dir);
  return { removed: true, left: [] };
}
