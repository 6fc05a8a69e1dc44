import { createProgress, drainWithProgress } from "../../progress.js";
import { formatBytes } from "../../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";

interface FetchArgs {
  artifactUri: string;
  stageDir: string;
  credentials?: string;
  quiet: boolean;
}

export const fetchCommand: CkptCommand<FetchArgs> = {
  command: "fetch",
  describe:
    "Stage an archived artifact under <stage-dir>/iter_*, every file proven by size and sha256; prints the staged path alone on stdout",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .option("artifact-uri", {
          type: "string",
          demandOption: true,
          describe: "The archive: s3://bucket/<...>/checkpoint_artifacts/iter_* (or gs://, file://)",
        })
        .option("stage-dir", {
          type: "string",
          // Its earlier name; materialize-hf stages an archived artifact under --stage-dir too.
          alias: "dst",
          demandOption: true,
          describe:
            "Staging directory; the artifact lands in <stage-dir>/iter_* (resumed when fetched before)",
        })
        .example(
          "ckpt artifact fetch --artifact-uri s3://bkt/proj/grp/run/20260901120000/checkpoint_artifacts/iter_000000300 --stage-dir /scratch/stage",
          "prints /scratch/stage/iter_000000300 once every file is verified",
        )
        .example(
          "ckpt artifact fetch --artifact-uri s3://bkt/.../iter_000000300 --stage-dir stage --credentials creds.json --json",
          "the same with explicit credentials and a JSON report",
        ),
    ),
  abortCode: "READER_ABORTED",
  async run(args, io, { signal, leaves }) {
    const [{ fetchArtifactIter }, { openStore }] = await Promise.all([
      import("@ckpt/archive-reader"),
      import("@ckpt/object-store"),
    ]);
    const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
    const store = await openStore(args.artifactUri, credentials === undefined ? {} : { credentials });
    const progress = createProgress(io, "fetch", { quiet: args.quiet, files: true });
    leaves(
      `staged download kept in ${args.stageDir} (verified files and partial ones are resumed, never re-downloaded); run the same command again to resume`,
    );
    const report = await drainWithProgress(
      fetchArtifactIter(store, args.stageDir, { uri: args.artifactUri, signal }),
      [progress],
      (event) => {
        if (event.type === "bytes") progress.update(event.doneBytes, event.totalBytes, event.path);
        else if (event.type === "file-done") progress.fileDone(event.path);
      },
    );
    const note = report.upToDate
      ? "already staged and verified"
      : `${formatBytes(report.downloadedBytes)} downloaded, ${report.files.length} files verified`;
    return {
      exitCode: 0,
      report: { ok: true, ...report },
      result: report.stagedDir,
      human: note,
    };
  },
};
