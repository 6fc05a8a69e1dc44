import type { TransferEvent, TransferReport } from "@ckpt/object-store";
import type { LongOperation } from "@ckpt/progress";
import { createProgress, drainWithProgress, type Progress } from "../../progress.js";
import { formatBytes } from "../../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";

interface CopyArgs {
  srcUri: string;
  dstUri: string;
  credentials?: string;
  quiet: boolean;
}

/** `<n> <verb> (<bytes>)[, <n> replaced (...)], <n> already present`: what a transfer did. Pure. */
export function transferSummary(report: TransferReport, verb: string): string {
  const replaced =
    report.replaced.length === 0 ? "" : `, ${report.replaced.length} replaced (same size, different digest)`;
  return `${report.transferred.length} ${verb} (${formatBytes(report.bytes)})${replaced}, ${report.skipped.length} already present`;
}

/** Runs a transfer to its report, counting objects on the progress line. */
export function summarizeTransfer(
  transfer: LongOperation<TransferEvent, TransferReport>,
  progress: Progress,
): Promise<TransferReport> {
  let seen = 0;
  return drainWithProgress(transfer, [progress], (event) => {
    seen++;
    progress.update(seen, seen, event.key);
  });
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
  abortCode: "STORE_ABORTED",
  async run(args, io, { signal, leaves }) {
    const { copyPrefixIter, openStore } = await import("@ckpt/object-store");
    const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
    const open = (uri: string) => openStore(uri, credentials === undefined ? {} : { credentials });
    const src = await open(args.srcUri);
    const dst = await open(args.dstUri);
    leaves(
      `${dst.uri} keeps the objects copied so far, each complete (in-flight uploads were aborted); run the same command again to copy the rest`,
    );
    const report = await summarizeTransfer(
      copyPrefixIter(src, dst, { signal }),
      createProgress(io, "copy", { quiet: args.quiet, unit: "items" }),
    );
    return {
      exitCode: 0,
      report: { ok: true, src: src.uri, dst: dst.uri, ...report },
      result: dst.uri,
      human: transferSummary(report, "copied"),
    };
  },
};
