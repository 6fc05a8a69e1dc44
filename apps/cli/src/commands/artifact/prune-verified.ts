import type { PruneReport } from "@ckpt/retention";
import { UsageError } from "../../errors.js";
import { createProgress } from "../../progress.js";
import { formatBytes, table } from "../../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";

interface PruneArgs {
  paths: string;
  credentials?: string;
}

/** One row per path (removed or kept with its code), then a one-line summary. */
function renderPrune(report: PruneReport): string {
  const rows = [
    ...report.removed.map((r) => [r.path, "removed", formatBytes(r.bytes), r.files.join(", ")]),
    ...report.kept.map((k) => [k.path, k.code, "-", k.reason]),
  ];
  const errors = report.errors.length === 0 ? "" : `; ${report.errors.length} failed (see above)`;
  const summary =
    `released ${report.removed.length} artifact${report.removed.length === 1 ? "" : "s"} ` +
    `(${formatBytes(report.freed_bytes)} freed), kept ${report.kept.length}${errors}`;
  return `${table(["path", "outcome", "freed", "detail"], rows, new Set([2]))}\n\n${summary}`;
}

export const pruneVerifiedCommand: CkptCommand<PruneArgs> = {
  command: "prune-verified",
  describe:
    "Release the local payload of published artifacts whose archive is proven (receipt, local digests, live remote objects)",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .option("paths", {
          type: "string",
          demandOption: true,
          describe:
            "Comma-separated checkpoint_artifacts/iter_* directories (or their model.pt); anything else is kept with a reason",
        })
        .example(
          "ckpt artifact prune-verified --paths run/20260901120000/checkpoint_artifacts/iter_000000300,run/20260901120000/checkpoint_artifacts/iter_000000400/model.pt --credentials creds.json",
          "free two artifacts whose .uploaded receipts bind the endpoint in creds.json; manifests and receipts stay",
        )
        .example(
          "ckpt artifact prune-verified --paths ./iter_000000300 --json",
          "the report as JSON: removed, kept (with code and reason), freed_bytes, errors",
        ),
    ),
  async run(args, io) {
    const [{ loadCredentials }, { pruneVerified }] = await Promise.all([
      import("@ckpt/object-store"),
      import("@ckpt/retention"),
    ]);
    const paths = args.paths
      .split(",")
      .map((p) => p.trim())
      .filter((p) => p !== "");
    if (paths.length === 0) {
      throw new UsageError(
        "--paths names no path. Pass checkpoint_artifacts/iter_* directories separated by commas.",
      );
    }
    const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
    const loaded = credentials === undefined ? undefined : await loadCredentials(credentials);
    const progress = createProgress(io, "verify", { quiet: args.quiet });
    let report: PruneReport;
    try {
      report = await pruneVerified(paths, {
        ...(loaded === undefined ? {} : { credentials: loaded }),
        onEvent: (event) => {
          if (event.type === "hash") progress.update(event.doneBytes, event.totalBytes, event.path);
        },
      });
    } finally {
      progress.finish();
    }
    return {
      exitCode: report.errors.length === 0 ? 0 : 1,
      report: { ok: report.errors.length === 0, ...report },
      human: renderPrune(report),
    };
  },
};
