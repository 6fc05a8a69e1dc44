import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { CHECKPOINT_ARTIFACTS_DIR, CHECKPOINTS_DIR, isRunTs, parseIterDir } from "@ckpt/manifest";
import type { McpProblem, RequestBudget } from "./budget.js";

/** A run attempt found under the root: the iterations of its checkpoints/ and checkpoint_artifacts/. */
interface ListedAttempt {
  /** Relative to the served root: what the other tools take. */
  readonly attempt: string;
  /** The attempt directory's name when it is a RUN_TS (`20260901120000`); null for a legacy flat layout. */
  readonly run_ts: string | null;
  readonly checkpoints: number[];
  readonly artifacts: number[];
}

export interface ListReport {
  readonly ok: boolean;
  readonly partial: boolean;
  readonly path: string;
  /** Runs (the directory holding attempts), each with its attempts, by path. */
  readonly runs: Array<{ run: string; attempts: ListedAttempt[] }>;
  readonly counts: { runs: number; attempts: number; checkpoints: number; artifacts: number };
  readonly problems: McpProblem[];
}

/** Below the listed directory: <project>/<group>/<name>/<RUN_TS> is four levels; a little slack for deeper roots. */
const MAX_DEPTH = 8;

function iterations(entries: readonly Dirent[]): number[] {
  const found: number[] = [];
  for (const entry of entries) {
    const iteration = entry.isDirectory() ? parseIterDir(entry.name) : undefined;
    if (iteration !== undefined) found.push(iteration);
  }
  return found.sort((a, b) => a - b);
}

/** Groups attempts by their run directory (the attempt's parent), sorted by path. Pure. */
function groupRuns(attempts: readonly ListedAttempt[]): ListReport["runs"] {
  const runs = new Map<string, ListedAttempt[]>();
  for (const attempt of [...attempts].sort((a, b) => a.attempt.localeCompare(b.attempt))) {
    const run = dirname(attempt.attempt);
    const list = runs.get(run);
    if (list === undefined) runs.set(run, [attempt]);
    else list.push(attempt);
  }
  return [...runs].map(([run, list]) => ({ run, attempts: list }));
}

/**
 * Every run attempt (a directory holding checkpoints/ or checkpoint_artifacts/) at or below `dir`,
 * breadth first, never following a symbolic link (a link is not a directory entry here, so loops
 * and escapes are not walked). Stops when the budget runs out and says so (`MCP_PARTIAL`); an
 * unreadable directory is a problem, not a failure.
 */
export async function listAttempts(root: string, dir: string, budget: RequestBudget): Promise<ListReport> {
  const attempts: ListedAttempt[] = [];
  const problems: McpProblem[] = [];
  const rel = (path: string) => relative(root, path) || ".";
  const read = async (path: string): Promise<Dirent[] | undefined> => {
    try {
      return await readdir(path, { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "an error";
      problems.push({
        code: "MCP_DIR_UNREADABLE",
        subject: rel(path),
        message: `${rel(path)} cannot be listed (${code}); what is below it is not in this answer. Check its permissions.`,
      });
      return undefined;
    }
  };
  let level = [dir];
  let partial = false;
  for (let depth = 0; depth <= MAX_DEPTH && level.length > 0 && !partial; depth++) {
    const next: string[] = [];
    for (const path of level) {
      if (budget.expired) {
        partial = true;
        break;
      }
      const entries = await read(path);
      if (entries === undefined) continue;
      const sub = new Map(entries.filter((e) => e.isDirectory()).map((e) => [e.name, e]));
      if (sub.has(CHECKPOINTS_DIR) || sub.has(CHECKPOINT_ARTIFACTS_DIR)) {
        const [checkpoints, artifacts] = await Promise.all(
          [CHECKPOINTS_DIR, CHECKPOINT_ARTIFACTS_DIR].map(async (name) =>
            sub.has(name) ? iterations((await read(join(path, name))) ?? []) : [],
          ),
        );
        const name = basename(path);
        attempts.push({
          attempt: rel(path),
          run_ts: isRunTs(name) ? name : null,
          checkpoints: checkpoints!,
          artifacts: artifacts!,
        });
        continue;
      }
      for (const entry of sub.values()) next.push(join(path, entry.name));
    }
    level = next.sort();
  }
  if (partial) problems.push(budget.partial(rel(dir), `listing ${rel(dir)}`));
  const runs = groupRuns(attempts);
  return {
    ok: problems.length === 0,
    partial,
    path: rel(dir),
    runs,
    counts: {
      runs: runs.length,
      attempts: attempts.length,
      checkpoints: attempts.reduce((n, a) => n + a.checkpoints.length, 0),
      artifacts: attempts.reduce((n, a) => n + a.artifacts.length, 0),
    },
    problems,
  };
}
