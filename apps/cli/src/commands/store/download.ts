import { createProgress } from "../../progress.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";
import { summarizeTransfer, transferSummary } from "./copy.js";

interface DownloadArgs {
  uri: string;
  localDir: string;
  credentials?: string;
  quiet: boolean;
}

export const downloadCommand: CkptCommand<DownloadArgs> = {
  command: "download <uri> <local-dir>",
  describe:
    "Download every object under a prefix into a local directory (idempotent: a same-size file is skipped when its digest matches the recorded one, replaced otherwise)",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .positional("uri", {
          type: "string",
          demandOption: true,
          describe: "s3://bucket/prefix, gs://..., file:///dir",
        })
        .positional("local-dir", {
          type: "string",
          demandOption: true,
          describe: "Where the objects land, keys as paths",
        })
        .example(
          "ckpt store download s3://bkt/proj/grp/run/20260901120000/checkpoints/iter_000000100 /shared/base",
          "pull a checkpoint to shared storage",
        ),
    ),
  abortCode: "STORE_ABORTED",
  async run(args, io, { signal, leaves }) {
    const { downloadPrefixIter, openStore } = await import("@ckpt/object-store");
    const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
    const store = await openStore(args.uri, credentials === undefined ? {} : { credentials });
    leaves(
      `${args.localDir} keeps the files downloaded so far, each complete (the partial one was removed); run the same command again to download the rest`,
    );
    const events = downloadPrefixIter(store, "", args.localDir, { signal });
    const report = await summarizeTransfer(
      events,
      createProgress(io, "download", { quiet: args.quiet, unit: "items" }),
    );
    return {
      exitCode: 0,
      report: { ok: true, uri: store.uri, localDir: args.localDir, ...report },
      result: args.localDir,
      human: transferSummary(report, "downloaded"),
    };
  },
};
