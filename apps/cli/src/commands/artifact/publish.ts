import { basename, join } from "node:path";
import { artifactPrefixFor, classifyIterPath, parseIterDir, UPLOADED_MARKER } from "@ckpt/manifest";
import type { PublishDryRun, PublishReport } from "@ckpt/archive-publisher";
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
  "dry-run": boolean;
  repair: boolean;
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
    /** The receipt binds this publish's scheme, bucket and prefix (its endpoint may differ). */
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
      `its .uploaded receipt binds ${receipt.uri}; publishing here would replace it, and prune-verified would then check only the new destination`,
    );
  }
  return found;
}

/** How far a publish got, from its events: what an interruption leaves depends on it. */
interface PublishProgress {
  /** The declaration is in the store (created by this run or found there). */
  declared: boolean;
  /** Payloads this run uploaded completely. */
  uploaded: number;
  /** The manifest is committed: the archive is published. */
  committed: boolean;
  receipted: boolean;
}

/** What an interrupted publish leaves at `uri` and how to resume. Pure. */
export function publishLeaves(uri: string, progress: PublishProgress): string {
  if (progress.receipted) {
    return `${uri} is published and the receipt written, but not every local payload was released; run the same command again to release the rest`;
  }
  if (progress.committed) {
    return `${uri} is published (manifest committed) but the local receipt is not written; run the same command again to verify the archive and write it`;
  }
  if (!progress.declared) {
    return `nothing published; ${uri} holds no new objects; run the same command again to publish`;
  }
  return `nothing published: ${uri} has no manifest (written last), so no reader takes it; the declaration and ${progress.uploaded} complete payloads stay there and are reused, in-flight uploads were aborted; run the same command again to resume`;
}

/** What an interrupted repair leaves at `uri`. Pure. */
function repairLeaves(uri: string): string {
  return `${uri} stays committed; the objects re-uploaded so far are complete and verified, in-flight uploads were aborted; run the same command again to repair the rest`;
}

/** The objects a repair re-uploaded (or would), each with what was wrong. Pure. */
function repairedList(repaired: NonNullable<PublishReport["repaired"]>): string {
  return repaired.map((o) => `${o.path} (${o.status.replace("_", " ")})`).join(", ");
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

/** What a dry run would upload and release, one line each, then that nothing was done. */
function renderPublishDryRun(dir: string, report: PublishReport, would: PublishDryRun): string {
  const { uri, repaired } = report;
  const upload =
    repaired !== undefined
      ? `would re-upload ${repaired.length} of ${report.inventory.length} objects${repaired.length === 0 ? " (every one reads back as declared)" : `: ${repairedList(repaired)}`}`
      : `would upload ${would.would_upload.length} files${would.would_upload.length === 0 ? " (the archive is already there)" : `: ${would.would_upload.join(", ")}`}`;
  const lines = [`dry run: nothing was uploaded, written or released; ${dir} -> ${uri} ${upload}`];
  if (would.would_rewrite_manifest) lines.push("the local manifest would be completed with digests first");
  for (const r of would.would_remove)
    lines.push(`would release ${r.path} (${formatBytes(r.bytes)}): ${r.reason}`);
  return lines.join("\n");
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
        .option("dry-run", {
          type: "boolean",
          default: false,
          describe:
            "Decide exactly as a real publish (hash, read the destination, plan) but upload, write and release nothing; the report says what would be uploaded and, with --delete-local, released",
        })
        .option("repair", {
          type: "boolean",
          default: false,
          describe:
            "Repair a committed archive from this artifact: read back every object its declaration records and re-upload those missing or damaged (another size or sha256), verified as a first publish; refused unless the archive declares exactly the local bytes",
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
      )
      .example(
        "ckpt artifact publish --artifact-dir <dir> --upload-prefix <p> --bucket experiments --repair --dry-run",
        "list the objects of the committed archive that are missing or damaged; without --dry-run, re-upload them",
      ),
  abortCode: "PUBLISH_ABORTED",
  async run(args, io, { signal, leaves }) {
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
    const progress: PublishProgress = { declared: false, uploaded: 0, committed: false, receipted: false };
    const left = () =>
      args.repair && !progress.receipted ? repairLeaves(uri) : publishLeaves(uri, progress);
    leaves(left());
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
                // The endpoint alone may differ (a proxy, another route to the same service): the
                // bucket and key are what the receipt binds, and publish verifies what it writes.
                same: sameDestination(receipt, { ...store.identity, endpoint: receipt.endpoint }),
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
        signal,
        dryRun: args["dry-run"],
        repair: args.repair,
        ...(uploadConcurrency === undefined ? {} : { uploadConcurrency }),
      }),
      [hashing, uploading],
      (event) => {
        if (event.type === "hash") hashing.update(event.doneBytes, event.totalBytes, event.path);
        else if (event.type === "plan" || event.type === "repair") hashing.finish();
        else if (event.type === "upload") uploading.update(event.doneBytes, event.totalBytes, event.path);
        else if (event.type === "declaration") progress.declared = true;
        else if (event.type === "uploaded") {
          progress.uploaded++;
          uploading.fileDone(event.path);
        } else if (event.type === "committed") progress.committed = true;
        else if (event.type === "receipt") progress.receipted = true;
        leaves(left());
      },
    );
    if (report.dry_run !== undefined) {
      const { dry_run: would, ...rest } = report;
      return {
        exitCode: 0,
        report: { ok: true, ...rest, dry_run: true, ...would },
        human: renderPublishDryRun(dir, report, would),
      };
    }
    const total = report.inventory.reduce((sum, f) => sum + f.size, 0);
    const done =
      report.repaired === undefined
        ? report.status === "published"
          ? `, ${report.uploaded.length} uploaded`
          : ", remote verified"
        : report.repaired.length === 0
          ? ", nothing to repair: every object reads back as declared; remote verified"
          : `, re-uploaded ${repairedList(report.repaired)}; remote verified`;
    const lines = [
      `${report.status} ${dir} -> ${report.uri}: ${report.inventory.length} files, ${formatBytes(total)}${done}`,
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
