import { basename, join } from "node:path";
import { artifactPrefixFor, classifyIterPath, parseIterDir, UPLOADED_MARKER } from "@ckpt/manifest";
import type { DestinationIdentity } from "@ckpt/object-store";
import { DestinationConflictError, UsageError } from "../../errors.js";
import { createProgress, drainWithProgress } from "../../progress.js";
import { formatBytes } from "../../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../../store-options.js";
import type { CkptCommand } from "../registry.js";

interface PublishArgs {
  "artifact-dir": string;
  "upload-prefix": string;
  bucket?: string;
  credentials?: string;
  "delete-local": boolean;
  "upload-concurrency"?: number;
  force: boolean;
}

const RUN_TS = /^[0-9]{14}$/;

/**
 * Why publishing `dir` to `destination` under `uploadPrefix` contradicts what the artifact says
 * of itself: its attempt directory is another RUN_TS than the prefix names, or its receipt binds
 * another destination (publishing would replace it). Empty when nothing does. Pure.
 */
function publishContradictions(input: {
  readonly dir: string;
  readonly uploadPrefix: string;
  /** The destination the existing receipt binds; undefined without one. */
  readonly receipt?: {
    readonly identity: DestinationIdentity;
    readonly uri: string;
    /** `sameDestination(receipt, the destination of this publish)`. */
    readonly same: boolean;
  };
}): string[] {
  const found: string[] = [];
  const attemptTs = basename(classifyIterPath(input.dir)?.attemptDir ?? "");
  const segments = input.uploadPrefix.split("/").filter((s) => s !== "");
  const prefixTs = segments.at(-1) === "checkpoints" ? segments.at(-2) : undefined;
  if (RUN_TS.test(attemptTs) && prefixTs !== undefined && RUN_TS.test(prefixTs) && attemptTs !== prefixTs) {
    found.push(
      `the artifact belongs to run attempt ${attemptTs} but --upload-prefix names run ${prefixTs} (another attempt's archive)`,
    );
  }
  const receipt = input.receipt;
  if (receipt !== undefined && !receipt.same) {
    found.push(
      `its .uploaded receipt binds ${receipt.uri} (endpoint ${receipt.identity.endpoint}); publishing here would replace it, and prune-verified would then check only the new destination`,
    );
  }
  return found;
}

/**
 * The destination URI of an artifact: the bucket root (a bare name means s3://<name>) joined with
 * the artifact prefix derived from the run's upload prefix. Pure.
 */
export function artifactDestinationUri(bucket: string, uploadPrefix: string, iteration: number): string {
  const root = bucket.includes("://") ? bucket : `s3://${bucket}`;
  const prefix = artifactPrefixFor(uploadPrefix, iteration);
  return `${root.endsWith("/") ? root.slice(0, -1) : root}/${prefix}`;
}

export const publishCommand: CkptCommand<PublishArgs> = {
  command: "publish",
  describe: "Archive a committed artifact: declaration first, verified payloads, manifest last, receipt",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .option("artifact-dir", {
          type: "string",
          demandOption: true,
          describe: "The committed checkpoint_artifacts/iter_* directory",
        })
        .option("upload-prefix", {
          type: "string",
          demandOption: true,
          describe: "The run's upload prefix <project>/<group>/<name>/<run_ts>/checkpoints",
        })
        .option("bucket", {
          type: "string",
          describe:
            "Bucket name (s3, endpoint from the credentials), s3://b, gs://b or file:///root; default $CKPT_BUCKET, then the config file",
        })
        .option("delete-local", {
          type: "boolean",
          default: false,
          describe: "After verification, release the local payloads (the manifest and receipt stay)",
        })
        .option("upload-concurrency", {
          type: "number",
          describe: "Payload uploads in flight at once, 1 to 64 (default 8)",
        })
        .option("force", {
          type: "boolean",
          default: false,
          describe:
            "Publish even where the destination contradicts the artifact: another RUN_TS than its attempt, or another destination than its receipt binds",
        }),
    )
      .example(
        "ckpt artifact publish --artifact-dir run/ts/checkpoint_artifacts/iter_000000300 --upload-prefix vlm/grpo/run-a/20260901120000/checkpoints --bucket experiments --credentials creds.json",
        "archive to s3://experiments/vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300",
      )
      .example(
        "ckpt artifact publish --artifact-dir <dir> --upload-prefix <p> --bucket file:///mnt/archive --delete-local --json",
        "archive to a shared filesystem, then free the local payloads",
      ),
  async run(args, io) {
    const [{ publishArtifactIter }, { openStore, formatStoreUri, sameDestination }] = await Promise.all([
      import("@ckpt/archive-publisher"),
      import("@ckpt/object-store"),
    ]);
    const dir = args["artifact-dir"];
    const iteration = parseIterDir(basename(dir.endsWith("/") ? dir.slice(0, -1) : dir));
    if (iteration === undefined) {
      throw new UsageError(`--artifact-dir ${dir} is not an iter_<digits> directory.`);
    }
    const uploadConcurrency = args["upload-concurrency"];
    if (
      uploadConcurrency !== undefined &&
      !(Number.isInteger(uploadConcurrency) && uploadConcurrency >= 1 && uploadConcurrency <= 64)
    ) {
      throw new UsageError(`--upload-concurrency ${uploadConcurrency} is not a whole number from 1 to 64.`);
    }
    const defaults = resolveStoreDefaults(args, io);
    if (defaults.bucket === undefined) {
      throw new UsageError(
        'no bucket: pass --bucket, set CKPT_BUCKET, or put "bucket" in the ckpt config file.',
      );
    }
    const uri = artifactDestinationUri(defaults.bucket, args["upload-prefix"], iteration);
    const store = await openStore(
      uri,
      defaults.credentials === undefined ? {} : { credentials: defaults.credentials },
    );
    if (!args.force) {
      const receipt = await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName)).then(
        (read) => (read.legacy ? undefined : read.marker.destination),
        // No receipt, or one publish itself judges (and rewrites): nothing bound to contradict.
        () => undefined,
      );
      const contradictions = publishContradictions({
        dir,
        uploadPrefix: args["upload-prefix"],
        ...(receipt === undefined
          ? {}
          : {
              receipt: {
                identity: receipt,
                uri: formatStoreUri(receipt),
                same: sameDestination(receipt, store.identity),
              },
            }),
      });
      if (contradictions.length > 0) {
        throw new DestinationConflictError(
          `publish ${dir} to ${uri}: ${contradictions.join("; ")}. Nothing was uploaded. Check --upload-prefix and --bucket, or pass --force to publish there anyway.`,
        );
      }
    }
    const quiet = args.quiet || args.json;
    const hashing = createProgress(io, "hash", { quiet });
    const uploading = createProgress(io, "upload", { quiet, files: true });
    const report = await drainWithProgress(
      publishArtifactIter(dir, store, {
        deleteLocal: args["delete-local"],
        ...(uploadConcurrency === undefined ? {} : { uploadConcurrency }),
      }),
      [hashing, uploading],
      (event) => {
        if (event.type === "hash") hashing.update(event.doneBytes, event.totalBytes, event.path);
        else if (event.type === "plan") hashing.finish();
        else if (event.type === "upload") uploading.update(event.doneBytes, event.totalBytes, event.path);
        else if (event.type === "uploaded") uploading.fileDone(event.path);
      },
    );
    const total = report.inventory.reduce((sum, f) => sum + f.size, 0);
    const lines = [
      `${report.status} ${dir} -> ${report.uri}: ${report.inventory.length} files, ${formatBytes(total)}` +
        (report.status === "published" ? `, ${report.uploaded.length} uploaded` : ", remote verified"),
    ];
    if (report.manifest_rewritten)
      lines.push("the local manifest was completed with digests (or converted) before upload");
    if (report.released_earlier.length > 0) {
      lines.push(
        `${report.released_earlier.length} payload files were already released locally; their receipt covers them`,
      );
    }
    if (report.removed.length > 0) {
      lines.push(`released ${report.removed.length} local payload files, ${formatBytes(report.freed_bytes)}`);
    }
    return { exitCode: 0, report: { ok: true, ...report }, result: report.uri, human: lines.join("\n") };
  },
};
