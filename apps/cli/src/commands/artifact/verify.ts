import { join } from "node:path";
import type { VerifyReport } from "@ckpt/archive-reader";
import type { Leftovers } from "../../gc/leftovers.js";
import { formatBytes, table } from "../../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";

interface VerifyArgs {
  artifactDir: string;
  credentials?: string;
}

/** The line naming what ckpt left beside the archive, if anything. */
function leftoverLine(leftovers: Leftovers): string {
  return leftovers.count === 0
    ? ""
    : `\nleftovers: ${leftovers.count} item${leftovers.count === 1 ? "" : "s"} (${formatBytes(leftovers.bytes)}) ckpt left beside the archive; \`${leftovers.gc}\` lists them, --apply removes them`;
}

/** How a failed archive is repaired from the artifact whose receipt was checked. Pure. */
function repairAdvice(artifactDir: string): string {
  return `repair: if ${artifactDir} still holds the published bytes, \`ckpt artifact publish --repair --artifact-dir ${artifactDir}\` with the --upload-prefix and --bucket it was published with re-uploads the missing or damaged objects (--dry-run first lists them)`;
}

/**
 * One line for a sound archive; otherwise a table naming every object that failed and the way to
 * repair it. Then any leftovers.
 */
function renderVerify(report: VerifyReport, uri: string, leftovers: Leftovers, artifactDir: string): string {
  const count = report.objects.length === 1 ? "1 object" : `${report.objects.length} objects`;
  if (report.ok) {
    return `verified ${count} at ${uri}: every recorded object is live with its size and sha256${leftoverLine(leftovers)}`;
  }
  const rows = report.problems.map((p) => [p.path, p.status, p.message.slice(p.path.length + 2)]);
  return `verification FAILED at ${uri}: ${report.problems.length} of ${count} not as recorded\n\n${table(["object", "status", "detail"], rows)}\n${repairAdvice(artifactDir)}${leftoverLine(leftovers)}`;
}

export const verifyCommand: CkptCommand<VerifyArgs> = {
  command: "verify",
  exitCodes: { 1: "the archive is not proven (the report names each problem)" },
  describe:
    "HEAD every object an artifact's .uploaded receipt records (size and sha256; nothing is downloaded)",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .option("artifact-dir", {
          type: "string",
          demandOption: true,
          describe: "The local checkpoint_artifacts/iter_* directory holding the .uploaded receipt",
        })
        .example(
          "ckpt artifact verify --artifact-dir run/20260901120000/checkpoint_artifacts/iter_000000300",
          "check the archive the receipt names (credentials from $CKPT_CREDENTIALS or the config file)",
        )
        .example(
          "ckpt artifact verify --artifact-dir ./iter_000000300 --credentials creds.json --json",
          "the same against the endpoint in creds.json, as a JSON report",
        ),
    ),
  async run(args, io) {
    const [{ readReceipt, verifyReceipt }, { formatStoreUri, openStore }, { leftoversOf }] =
      await Promise.all([
        import("@ckpt/archive-reader"),
        import("@ckpt/object-store"),
        import("../../gc/leftovers.js"),
      ]);
    const { marker } = await readReceipt(args.artifactDir);
    const { scheme, bucket, prefix } = marker.destination;
    // The destination is recomputed from the receipt and the supplied credentials' endpoint;
    // verifyReceipt refuses the receipt when the two identities differ.
    const uri = formatStoreUri({ scheme, bucket, prefix });
    const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
    const store = await openStore(uri, credentials === undefined ? {} : { credentials });
    const report = await verifyReceipt(args.artifactDir, store);
    const leftovers = await leftoversOf(store, scheme === "file" ? join(bucket, prefix) : undefined);
    return {
      exitCode: report.ok ? 0 : 1,
      report: { ...report, uri, leftovers },
      human: renderVerify(report, uri, leftovers, args.artifactDir),
    };
  },
};
