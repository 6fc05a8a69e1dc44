import { messageOf } from "@ckpt/errors";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  hashFile,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  type MaterializedMarker,
  type Ownership,
  readOwnership,
  removeOwnedDirectory,
} from "@ckpt/manifest";
import { HF_INDEX_FILE } from "@ckpt/tensors";
import { inspectHfDirectory } from "../check/hf-directory.js";
import { refusal } from "../errors.js";
import type { BasePreflight } from "../preflight/base.js";
import { checkSidecars } from "../verify/sidecars.js";
import type { TreeState } from "./decide.js";

/** A writeFileAtomic temporary of one of this tool's records (left by a kill while it was written). */
const RECORD_TEMPORARY = new RegExp(
  `^\\.(${[OVERLAY_SOURCE.fileName, MATERIALIZED_MARKER.fileName].map((n) => n.replace(/\./g, "\\.")).join("|")})\\.tmp-\\d+-[0-9a-f]{12}$`,
);

/**
 * Why a marked tree is not intact, or nothing: every inventoried file present at its recorded
 * size, the index byte-identical to its recorded digest, every shard's header valid with exactly
 * the index's keys, the recorded tensor count, and (when the marker is for this base) every copied
 * sidecar identical to the base's or, for unified templates, to the recorded digests.
 */
async function intactProblems(
  dir: string,
  marker: MaterializedMarker,
  base: BasePreflight,
): Promise<{ problems: string[]; sidecars: string[] }> {
  const problems: string[] = [];
  for (const entry of marker.shards) {
    const path = join(dir, ...entry.path.split("/"));
    try {
      const info = await lstat(path);
      if (!info.isFile()) problems.push(`${entry.path} is not a regular file`);
      else if (info.size !== entry.size)
        problems.push(`${entry.path} is ${info.size} bytes, recorded ${entry.size}`);
      else if (entry.path === HF_INDEX_FILE && (await hashFile(path)).sha256 !== entry.sha256) {
        problems.push(`${entry.path} differs from its recorded digest`);
      }
    } catch (error) {
      problems.push(`${entry.path}: ${messageOf(error)}`);
    }
  }
  if (problems.length > 0) return { problems, sidecars: [] };
  const layout = await inspectHfDirectory(dir);
  for (const p of layout.problems) problems.push(`${p.file}: ${p.message}`);
  if (layout.ok && layout.tensorCount !== marker.tensor_count) {
    problems.push(`the index lists ${layout.tensorCount} tensors, the marker ${marker.tensor_count}`);
  }
  if (marker.base.fingerprint === base.fingerprint) {
    const recorded = new Map((marker.chat_template?.files ?? []).map((f) => [f.path, f.sha256]));
    return { problems, sidecars: await checkSidecars(dir, base.dir, base.sidecars, { recorded }) };
  }
  return { problems, sidecars: [] };
}

/**
 * The ownership rule: a tree is this tool's when its marker or (an unfinished build's) overlay
 * record parses and validates (its schema names this tool), or when it holds nothing but a
 * record's temporary (a build that had just begun). A garbage, empty-JSON or non-file record
 * makes the tree foreign: it is refused and never replaced or removed.
 */
async function ownershipOf(
  dir: string,
  names: readonly string[],
): Promise<Ownership<MaterializedMarker | undefined>> {
  if (names.includes(MATERIALIZED_MARKER.fileName))
    return readOwnership(dir, MATERIALIZED_MARKER.fileName, MATERIALIZED_MARKER.parse);
  if (names.includes(OVERLAY_SOURCE.fileName)) {
    const overlay = await readOwnership(dir, OVERLAY_SOURCE.fileName, OVERLAY_SOURCE.parse);
    return overlay.owned ? { owned: true, record: undefined } : overlay;
  }
  if (names.every((n) => RECORD_TEMPORARY.test(n))) return { owned: true, record: undefined };
  return {
    owned: false,
    reason: `holds ${names.length} entries and no ckpt record (${MATERIALIZED_MARKER.fileName} or ${OVERLAY_SOURCE.fileName})`,
  };
}

/**
 * Removes a tree this tool owns (see {@link ownershipOf}) with its ownership records
 * (`.overlay_source.json`, then `.materialized`) last, so a kill halfway leaves a tree still
 * recognisably this tool's, which the next run removes again, rather than an unmarked remnant it
 * must refuse as foreign. A foreign tree is refused untouched.
 */
export function removeOwnedTree(dir: string): Promise<void> {
  return removeOwnedDirectory(dir, {
    ownership: async (path) => ownershipOf(path, await readdir(path)),
    refuse: (path, reason) =>
      refusal(
        "MATERIALIZE_OUTPUT_FOREIGN",
        `${path} ${reason}`,
        "removing it would have deleted files ckpt did not write",
        "Move them away or choose another --out; ckpt never deletes what it did not create.",
        { file: path },
      ),
    recordsLast: [OVERLAY_SOURCE.fileName, MATERIALIZED_MARKER.fileName],
  });
}

/**
 * Classifies what is at `dir` for {@link decideMaterialize}. With `sidecarsRepairable` (the staged
 * tree, whose sidecars a publish re-syncs from the base first) a marked tree of this base whose
 * shards, index and count are intact is complete whatever its sidecars hold.
 */
export async function inspectTree(
  dir: string,
  base: BasePreflight,
  options: { sidecarsRepairable?: boolean } = {},
): Promise<TreeState> {
  let names: string[];
  try {
    const info = await lstat(dir);
    if (!info.isDirectory()) return { kind: "foreign", reason: "exists and is not a directory" };
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "absent" };
    throw error;
  }
  const ownership = await ownershipOf(dir, names);
  if (!ownership.owned) return { kind: "foreign", reason: ownership.reason };
  const marker = ownership.record;
  if (marker === undefined) {
    return names.includes(OVERLAY_SOURCE.fileName)
      ? { kind: "incomplete", reason: "its build did not finish" }
      : { kind: "incomplete", reason: "its build had just begun" };
  }
  const found = await intactProblems(dir, marker, base);
  const problems = options.sidecarsRepairable ? found.problems : [...found.problems, ...found.sidecars];
  return problems.length === 0
    ? { kind: "complete", marker }
    : { kind: "incomplete", reason: `it is not intact: ${problems.slice(0, 3).join("; ")}` };
}
