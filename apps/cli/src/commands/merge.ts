import type { MergeReport } from "@ckpt/merge";
import { createProgress, drainWithProgress } from "../progress.js";
import { formatBytes } from "../render.js";
import { lockWaitOption, parseLockWait } from "./lock-wait.js";
import type { CkptCommand } from "./registry.js";

interface MergeArgs {
  mode: string;
  experts: string | string[];
  base?: string;
  lam?: number;
  out: string;
  iteration?: number;
  diag?: string;
  force: boolean;
  "dry-run": boolean;
  "lock-wait-seconds"?: string;
  quiet: boolean;
}

/** `--experts a,b --experts c` → [a, b, c], in order (the order is part of the request). */
export function splitExperts(value: string | readonly string[]): string[] {
  return (typeof value === "string" ? [value] : value).flatMap((v) => v.split(","));
}

/** The human rendering of a merge report. */
function renderMerge(report: MergeReport): string {
  const what =
    report.mode === "avg"
      ? `average of ${report.experts.length} experts`
      : `base + ${report.lam} × Σ(expert − base) over ${report.experts.length} experts`;
  const head =
    report.status === "skipped"
      ? `skipped: ${report.out} already holds this ${what} (${report.reason})`
      : `merged: ${report.out} (${what}; ${report.reason})`;
  return [
    head,
    `  ${report.tensors} tensors, ${formatBytes(report.model.size)}, sha256 ${report.model.sha256}`,
    `  diagnostics: ${report.diagnostics}`,
    ...(report.recovered.length > 0
      ? [`  recovered an interrupted run first: ${report.recovered.join(", ")}`]
      : []),
  ].join("\n");
}

export const mergeCommand: CkptCommand<MergeArgs> = {
  command: "merge",
  describe:
    "Merge consolidated experts (avg, or task vectors onto an HF base) into a model-only artifact, streaming",
  builder: (yargs) =>
    yargs
      .option("mode", {
        type: "string",
        choices: ["avg", "tv"],
        demandOption: true,
        describe: "avg: uniform average of the experts; tv: base + lam × Σ(expert − base)",
      })
      .option("experts", {
        type: "string",
        demandOption: true,
        describe: "Expert files, comma-separated, in order (torch.save {net: state_dict} or .safetensors)",
      })
      .option("base", { type: "string", describe: "Hugging Face base directory (required for tv)" })
      .option("lam", { type: "number", describe: "Task-vector scale for tv (default 1.0)" })
      .option("out", {
        type: "string",
        demandOption: true,
        describe: "<...>/checkpoint_artifacts/iter_<n>/model.pt",
      })
      .option("iteration", { type: "number", describe: "Must equal the iteration of the --out directory" })
      .option("diag", {
        type: "string",
        describe: "Diagnostics JSON (default merge-diagnostics.json inside the artifact, archived with it)",
      })
      .option("force", {
        type: "boolean",
        default: false,
        describe: "Replace a completed merge of another request or tool version (or rebuild this one)",
      })
      .option("dry-run", {
        type: "boolean",
        default: false,
        describe: "Decide as a real merge would (skip, build, or what --force replaces) and write nothing",
      })
      .option("lock-wait-seconds", lockWaitOption("merge"))
      .example(
        "ckpt merge --mode avg --experts a/model.pt,b/model.pt,c/model.pt --out run/20260901120000/checkpoint_artifacts/iter_000000300/model.pt",
        "uniform average; re-running it skips once the output is complete",
      )
      .example(
        "ckpt merge --mode tv --lam 0.5 --base /models/base-hf --experts a/model.pt,b/model.pt --out run/ts/checkpoint_artifacts/iter_000000300/model.pt --diag tv-diag.json",
        "task vectors onto the base, with per-tensor delta norms and cosines in tv-diag.json",
      ),
  abortCode: "MERGE_ABORTED",
  async run(args, io, { signal, leaves }) {
    const lockWaitSeconds = parseLockWait(args["lock-wait-seconds"]);
    const { dryRunMerge, mergeExpertsIter } = await import("@ckpt/merge");
    const request = {
      mode: args.mode,
      experts: splitExperts(args.experts),
      base: args.base,
      lam: args.lam,
      out: args.out,
      iteration: args.iteration,
      diag: args.diag,
      force: args.force,
    };
    if (args["dry-run"]) {
      const would = await dryRunMerge(request);
      const replacing =
        would.would_replace.length === 0 ? "" : `, replacing ${would.would_replace.join(", ")}`;
      return {
        exitCode: 0,
        report: { ok: true, ...would },
        human: `dry run: nothing was written; would ${would.action} ${would.out} (${would.reason})${replacing}`,
      };
    }
    const progress = createProgress(io, "merge", { quiet: args.quiet });
    leaves(
      `${args.out} was not changed (this run's partial output was removed); run the same command again to merge`,
    );
    const report = await drainWithProgress(
      mergeExpertsIter(request, {
        signal,
        ...(lockWaitSeconds === undefined ? {} : { lockWaitMs: lockWaitSeconds * 1000 }),
      }),
      [progress],
      (event) => {
        if (event.type === "bytes") progress.update(event.doneBytes, event.totalBytes, event.tensor);
      },
    );
    return { exitCode: 0, report: { ok: true, ...report }, result: report.out, human: renderMerge(report) };
  },
};
