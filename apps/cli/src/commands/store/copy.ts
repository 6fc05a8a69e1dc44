import type { TransferEvent, TransferReport } from "@ckpt/object-store";
import { createProgress, type Progress } from "../../progress.js";
import { formatBytes } from "../../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";

interface CopyArgs {
  srcUri: string;
  dstUri: string;
  credentials?: string;
  quiet: boolean;
}

/** Drains transfer events into a report, counting objects on the progress line. */
export async function summarizeTransfer(
  events: AsyncIterable<TransferEvent>,
  progress: Progress,
): Promise<TransferReport> {
  const transferred: Array<{ key: string; size: number }> = [];
  const skipped: Array<{ key: string; size: number }> = [];
  let bytes = 0;
  try {
    for await (const event of events) {
      if (event.type === "done") {
        transferred.push({ key: event.key, size: event.size });
        bytes += event.size;
      } else skipped.push({ key: event.key, size: event.size });
      const seen = transferred.length + skipped.length;
      progress.update(seen, seen, event.key);
    }
  } finally {
    progress.finish();
  }
  return { transferred, skipped, bytes };
}

export const copyCommand: CkptCommand<CopyArgs> = {
  command: "copy <src-uri> <dst-uri>",
  describe: "Copy every object under a prefix to another store or prefix, digest-checked (idempotent)",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .positional("src-uri", {
          type: "string",
          demandOption: true,
          describe: "Source prefix: s3://bucket/prefix, gs://..., file:///dir",
        })
        .positional("dst-uri", {
          type: "string",
          demandOption: true,
          describe: "Destination prefix; keys keep their names below it",
        })
        .example(
          "ckpt store copy s3://experiments/proj/run/iter_000000300 s3://permanent/proj/run/iter_000000300",
          "preserve an expiring checkpoint in the permanent bucket",
        ),
    ),
  async run(args, io) {
    const { copyPrefixIter, openStore } = await import("@ckpt/object-store");
    const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
    const open = (uri: string) => openStore(uri, credentials === undefined ? {} : { credentials });
    const src = await open(args.srcUri);
    const dst = await open(args.dstUri);
    const report = await summarizeTransfer(
      copyPrefixIter(src, dst),
      createProgress(io, "copy", { quiet: args.quiet, unit: "items" }),
    );
    return {
      exitCode: 0,
      report: { ok: true, src: src.uri, dst: dst.uri, ...report },
      human: `${dst.uri}: ${report.transferred.length} copied (${formatBytes(report.bytes)}), ${report.skipped.length} already present`,
    };
  },
};
