// drillCheckpoint: proves a checkpoint loads, without trusting its records alone. The tree is
// fingerprinted, every component is loaded once through ckpt's own readers (every byte read,
// every floating tensor scanned) and, when asked, by torch itself in a child process
// (`torch.load(weights_only=True)` / DCP's loader), then fingerprinted again: a drill that changed
// the checkpoint is an error, as is any component that does not load.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { fingerprintDirectory } from "@ckpt/diagnostics";
import { probeLocalCheckpoint } from "@ckpt/trainer-checkpoint-manager";
import { verifyPath } from "@ckpt/verify";
import { problem, problemFromError } from "./build.js";
import { problemCodeOf } from "./problems.js";
import type { EvidenceProblem } from "./schema.js";

export const DRILL_SCHEMA = "ckpt.drill.v1";

/** One load of one component. */
export interface DrillLoad {
  readonly ok: boolean;
  /** Tensors it held (null when the load failed or the reader does not count them). */
  readonly tensors: number | null;
  readonly duration_ms: number;
  /** Why it failed (empty when it loaded). */
  readonly message: string;
}

export interface DrillComponent {
  readonly name: string;
  readonly path: string;
  readonly kind: "file" | "directory";
  /** Through ckpt's readers (`ckpt verify --deep --finite` on the component). */
  readonly ckpt: DrillLoad;
  /** Through torch in a child process; null without `python`. */
  readonly torch: DrillLoad | null;
}

export interface DrillReport {
  readonly schema: typeof DRILL_SCHEMA;
  readonly ok: boolean;
  readonly dir: string;
  readonly iteration: number | null;
  /** The tree's fingerprint (`ckpt fingerprint`, full) before and after the loads. */
  readonly fingerprint_before: string | null;
  readonly fingerprint_after: string | null;
  readonly unchanged: boolean;
  readonly components: readonly DrillComponent[];
  readonly problems: readonly EvidenceProblem[];
}

export interface DrillOptions {
  /** A Python with torch: each component is also loaded by torch itself. */
  readonly python?: string;
  /** Bound on the torch process loading every component (default 10 minutes). */
  readonly torchTimeoutMs?: number;
}

/** Loads each component (kind and path, in argv pairs) with torch's own loaders: one JSON line per component. */
const TORCH_LOAD_SCRIPT = `
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
def count(value):
    if isinstance(value, torch.Tensor):
        return 1
    if isinstance(value, dict):
        return sum(count(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(count(v) for v in value)
    return 0
args = sys.argv[1:]
for kind, path in zip(args[0::2], args[1::2]):
    started = time.monotonic()
    try:
        if kind == "directory":
            from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys
            state = _load_state_dict_from_keys(checkpoint_id=path)
        else:
            state = torch.load(path, weights_only=True, map_location="cpu")
        line = {"ok": True, "tensors": count(state), "message": ""}
    except Exception as error:
        line = {"ok": False, "tensors": None, "message": f"torch could not load it: {type(error).__name__}: {error}"[:2000]}
    line["duration_ms"] = (time.monotonic() - started) * 1000
    print(json.dumps(line), flush=True)
`;

/** One torch process loads every component (its start-up is most of the cost); a crash fails every load. */
function torchLoads(
  python: string,
  components: ReadonlyArray<{ kind: DrillComponent["kind"]; path: string }>,
  timeoutMs: number,
): Promise<DrillLoad[]> {
  const started = performance.now();
  return new Promise((resolve) => {
    execFile(
      python,
      ["-c", TORCH_LOAD_SCRIPT, ...components.flatMap((c) => [c.kind, c.path])],
      {
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" },
      },
      (error, stdout, stderr) => {
        const lines = stdout.split("\n").filter((line) => line.trim() !== "");
        const failed = error
          ? `torch could not load it: ${stderr.trim().split("\n").at(-1) || error.message}`
          : "torch printed no answer for it";
        resolve(
          components.map(
            (_, i) =>
              (lines[i] === undefined
                ? { ok: false, tensors: null, duration_ms: performance.now() - started, message: failed }
                : JSON.parse(lines[i]!)) as DrillLoad,
          ),
        );
      },
    );
  });
}

async function ckptLoad(
  path: string,
  kind: DrillComponent["kind"],
  problems: EvidenceProblem[],
): Promise<DrillLoad> {
  const started = performance.now();
  try {
    const report = await verifyPath(path, { deep: true, finite: true });
    // verify names a file relative to what it judged: the component file itself, or a file in the directory.
    for (const p of report.problems)
      problems.push(
        problem(problemCodeOf(p.code), kind === "file" ? path : join(path, p.path), p.message, p.code),
      );
    return {
      ok: report.ok,
      tensors: report.tensors,
      duration_ms: performance.now() - started,
      message: report.problems.map((p) => `${p.code} ${p.path}: ${p.message}`).join("; "),
    };
  } catch (error) {
    problems.push(problemFromError(error, path));
    return {
      ok: false,
      tensors: null,
      duration_ms: performance.now() - started,
      message: String((error as Error).message),
    };
  }
}

async function fingerprint(dir: string, problems: EvidenceProblem[]): Promise<string | null> {
  try {
    return (await fingerprintDirectory(dir)).fingerprint;
  } catch (error) {
    problems.push(problemFromError(error, dir));
    return null;
  }
}

/**
 * Drills the full checkpoint `dir` (a `checkpoints/iter_*` directory): fingerprint, one load of
 * every component (ckpt's readers, and torch's with `python`), fingerprint again. Never throws for
 * what it finds; `ok` is false when a component did not load, a problem was found, or the
 * fingerprints differ (`DRILL_CHANGED_CHECKPOINT`).
 */
export async function drillCheckpoint(dir: string, options: DrillOptions = {}): Promise<DrillReport> {
  const problems: EvidenceProblem[] = [];
  const before = await fingerprint(dir, problems);
  const components: DrillComponent[] = [];
  let iteration: number | null = null;
  if (before !== null) {
    try {
      const probe = await probeLocalCheckpoint(dir, { needIteration: false, hashLegacyFile: false });
      if ("missing" in probe) {
        problems.push(problem("NOT_A_CHECKPOINT", dir, `${dir} is not a checkpoint ckpt can resume from`));
      } else {
        iteration = probe.iteration ?? null;
        for (const finding of probe.problems) problems.push(problem("INCOMPLETE_CHECKPOINT", dir, finding));
        const targets = Object.entries(probe.components).map(([name, target]) => {
          const kind: DrillComponent["kind"] = target.endsWith("/") ? "directory" : "file";
          return { name, kind, path: kind === "directory" ? target.slice(0, -1) : target };
        });
        const torch =
          options.python === undefined || targets.length === 0
            ? undefined
            : await torchLoads(options.python, targets, options.torchTimeoutMs ?? 600_000);
        for (const [i, target] of targets.entries()) {
          const ckpt = await ckptLoad(target.path, target.kind, problems);
          const load = torch?.[i] ?? null;
          if (load !== null && !load.ok)
            problems.push(problem("UNREADABLE_TENSOR_FILE", target.path, load.message));
          components.push({ ...target, ckpt, torch: load });
        }
        if (components.length === 0)
          problems.push(problem("INCOMPLETE_CHECKPOINT", dir, `${dir} lists no component`));
      }
    } catch (error) {
      problems.push(problemFromError(error, dir));
    }
  }
  const after = before === null ? null : await fingerprint(dir, problems);
  const unchanged = before !== null && before === after;
  if (before !== null && after !== null && !unchanged)
    problems.push(
      problem(
        "DRILL_CHANGED_CHECKPOINT",
        dir,
        `the fingerprint of ${dir} was ${before} before the drill and ${after} after it`,
      ),
    );
  return {
    schema: DRILL_SCHEMA,
    ok:
      problems.every((p) => p.severity !== "error") &&
      unchanged &&
      components.every((c) => c.ckpt.ok && c.torch?.ok !== false),
    dir,
    iteration,
    fingerprint_before: before,
    fingerprint_after: after,
    unchanged,
    components,
    problems,
  };
}
