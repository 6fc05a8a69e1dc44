import type { KeptArtifact, PruneReport } from "@ckpt/retention";
import { UsageError } from "../../errors.js";
import { createProgress } from "../../progress.js";
import { formatBytes, table } from "../../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";

interface PruneArgs {
  paths: string;
  credentials?: string;
  "dry-run": boolean;
}

/**
 * The requested paths whose payload is still held locally: every keep except one already released
 * (its goal holds). A mistyped path and an artifact kept for a broken archive both count. Pure.
 */
function notReleased(report: PruneReport): readonly KeptArtifact[] {
  return report.kept.filter((k) => k.code !== "PRUNE_ALREADY_RELEASED");
}

/**
 * 1 when the operation failed for a path (`errors`), else 3 when a requested path was kept, else 0:
 * a script can tell "nothing was freed by mistake" from "the store or disk failed". Pure.
 */
function pruneExitCode(report: PruneReport): 0 | 1 | 3 {
  if (report.errors.length > 0) return 1;
  return notReleased(report).length > 0 ? 3 : 0;
}

/** One row per path (removed, would be removed, or kept with its code), then a one-line summary. */
function renderPrune(report: PruneReport): string {
  const dryRun = report.dry_run === true;
  const rows = [
    ...report.removed.map((r) => [r.path, "removed", formatBytes(r.bytes), r.files.join(", ")]),
    ...(report.would_remove ?? []).map((r) => [
      r.path,
      "would remove",
      formatBytes(r.bytes),
      `${r.files.join(", ")} (${r.reason})`,
    ]),
    ...report.kept.map((k) => [k.path, k.code, "-", k.reason]),
  ];
  const errors = report.errors.length === 0 ? "" : `; ${report.errors.length} failed (see above)`;
  const held = notReleased(report).length;
  const unreleased = held === 0 ? "" : `; ${held} path${held === 1 ? "" : "s"} not released`;
  const released = dryRun
    ? `dry run: nothing was removed; would release ${report.would_remove?.length ?? 0} ` +
      `(${formatBytes((report.would_remove ?? []).reduce((s, r) => s + r.bytes, 0))})`
    : `released ${report.removed.length} artifact${report.removed.length === 1 ? "" : "s"} ` +
      `(${formatBytes(report.freed_bytes)} freed)`;
  const summary = `${released}, kept ${report.kept.length}${unreleased}${errors}`;
  return `${table(["path", "outcome", "freed", "detail"], rows, new Set([2]))}\n\n${summary}`;
}

export const pruneVerifiedCommand: CkptCommand<PruneArgs> = {
  command: "prune-verified",
  interruptLeaves:
    "the payloads released so far are gone locally (each after its archive was verified); the rest stay; run the same command again",
  describe:
    "Release the local payload of published artifacts whose archive is proven (receipt, local digests, live remote objects)",
  exitCodes: {
    0: "every path released (or already released)",
    1: "failed (store unreachable, local files unreadable or changed, delete failed)",
    3: "some path not released (kept: mistyped, not an artifact, archive not proven); the report names each",
  },
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .option("paths", {
          type: "string",
          demandOption: true,
          describe:
            "Comma-separated checkpoint_artifacts/iter_* directories (or their model.pt); anything else is kept with a reason",
        })
        .option("dry-run", {
          type: "boolean",
          default: false,
          describe: "Decide exactly as a real run (digests, remote checks) but remove nothing",
        })
        .example(
          "ckpt artifact prune-verified --paths run/20260901120000/checkpoint_artifacts/iter_000000300,run/20260901120000/checkpoint_artifacts/iter_000000400/model.pt --credentials creds.json",
          "free two artifacts whose .uploaded receipts bind the endpoint in creds.json; manifests and receipts stay",
        )
        .example(
          "ckpt artifact prune-verified --paths ./iter_000000300 --dry-run",
          "what would be released and why, nothing removed",
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
        dryRun: args["dry-run"],
        onEvent: (event) => {
          if (event.type === "hash") progress.update(event.doneBytes, event.totalBytes, event.path);
        },
      });
    } finally {
      progress.finish();
    }
    return {
      exitCode: pruneExitCode(report),
      report: { ok: report.errors.length === 0, ...report },
      human: renderPrune(report),
    };
  },
};
