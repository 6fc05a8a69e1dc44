import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  hashFile,
  MATERIALIZED_MARKER_FILE,
  type MaterializedMarker,
  OVERLAY_SOURCE_FILE,
  readMaterializedMarker,
} from "@ckpt/manifest";
import { HF_INDEX_FILE } from "@ckpt/tensors";
import { inspectHfDirectory } from "../check/hf-directory.js";
import { describe } from "../errors.js";
import type { BasePreflight } from "../preflight/base.js";
import { checkSidecars } from "../verify/sidecars.js";
import type { TreeState } from "./decide.js";

/** A writeFileAtomic temporary of one of this tool's records (left by a kill while it was written). */
const RECORD_TEMPORARY = new RegExp(
  `^\\.(${[OVERLAY_SOURCE_FILE, MATERIALIZED_MARKER_FILE].map((n) => n.replace(/\./g, "\\.")).join("|")})\\.tmp-\\d+-[0-9a-f]{12}$`,
);

/**
 * Why a marked tree is not intact, or nothing: every inventoried file present at its recorded
 * size, the index byte-identical to its recorded digest, every shard's header valid with exactly
 * the index's keys, the recorded tensor count, and (when the marker is for this base) every copied
 * sidecar identical to the base's or, for unified templates, to the recorded digests.
 */
export async function intactProblems(
  dir: string,
  marker: MaterializedMarker,
  base: BasePreflight,
): Promise<string[]> {
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
      problems.push(`${entry.path}: ${describe(error)}`);
    }
  }
  if (problems.length > 0) return problems;
  const layout = await inspectHfDirectory(dir);
  for (const p of layout.problems) problems.push(`${p.file}: ${p.message}`);
  if (layout.ok && layout.tensorCount !== marker.tensor_count) {
    problems.push(`the index lists ${layout.tensorCount} tensors, the marker ${marker.tensor_count}`);
  }
  if (marker.base.fingerprint === base.fingerprint) {
    const recorded = new Map((marker.chat_template?.files ?? []).map((f) => [f.path, f.sha256]));
    problems.push(...(await checkSidecars(dir, base.dir, base.sidecars, { recorded })));
  }
  return problems;
}

/** Classifies what is at `dir` for {@link decideMaterialize}. */
export async function inspectTree(dir: string, base: BasePreflight): Promise<TreeState> {
  let names: string[];
  try {
    const info = await lstat(dir);
    if (!info.isDirectory()) return { kind: "foreign", reason: "exists and is not a directory" };
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "absent" };
    throw error;
  }
  if (names.includes(MATERIALIZED_MARKER_FILE)) {
    let marker: MaterializedMarker;
    try {
      marker = await readMaterializedMarker(join(dir, MATERIALIZED_MARKER_FILE));
    } catch (error) {
      return {
        kind: "incomplete",
        reason: `its ${MATERIALIZED_MARKER_FILE} is not valid (${describe(error)})`,
      };
    }
    const problems = await intactProblems(dir, marker, base);
    return problems.length === 0
      ? { kind: "complete", marker }
      : { kind: "incomplete", reason: `it is not intact: ${problems.slice(0, 3).join("; ")}` };
  }
  if (names.includes(OVERLAY_SOURCE_FILE)) return { kind: "incomplete", reason: "its build did not finish" };
  if (names.every((n) => RECORD_TEMPORARY.test(n)))
    return { kind: "incomplete", reason: "its build had just begun" };
  return {
    kind: "foreign",
    reason: `holds ${names.length} entries and no ckpt record (${MATERIALIZED_MARKER_FILE} or ${OVERLAY_SOURCE_FILE})`,
  };
}
