import type { StorageProbeReport } from "@ckpt/diagnostics";
import type { QualificationReport } from "@ckpt/object-store";
import type { CliIo } from "../io.js";
import { paint, table } from "../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../store-options.js";
import type { CkptCommand, CkptCommandGroup } from "./registry.js";

interface StoreArgs {
  uri: string;
  credentials?: string;
}

interface StorageArgs {
  dir: string;
  expect: "any" | "shared";
}

/** The human rendering of a qualification report: the destination, one row per check, a verdict. */
function renderQualification(report: QualificationReport): string {
  const { endpoint, bucket, prefix } = report.identity;
  const where = `${report.uri} (endpoint ${endpoint}, bucket ${bucket}${prefix === "" ? "" : `, prefix ${prefix}`})`;
  const rows = report.checks.map((c) => [
    c.name,
    c.ok ? "ok" : c.required ? "FAIL" : "no",
    c.required ? "required" : "info",
    `${Math.round(c.durationMs)} ms`,
    c.detail,
  ]);
  const failed = report.checks.filter((c) => c.required && !c.ok).map((c) => c.name);
  const verdict = report.qualified
    ? "qualified: ckpt can publish archives to this store."
    : `NOT qualified (${failed.join(", ")}): ckpt will not publish here. ` +
      "Use an endpoint that enforces conditional writes (S3 If-None-Match, GCS ifGenerationMatch) and stores user metadata.";
  return `${where}\n\n${table(["check", "result", "kind", "time", "detail"], rows)}\n\n${verdict}`;
}

const doctorStoreCommand: CkptCommand<StoreArgs> = {
  command: "object-store <uri>",
  aliases: ["store"],
  interruptLeaves:
    "the probe objects this run wrote below .ckpt-qualify/ under the URI may be left; run the same command again",
  exitCodes: { 1: "not qualified: a required check failed" },
  describe: "Qualify an object store for archives: conditional create, digests, multipart, list, delete",
  builder: (yargs) =>
    withCredentialsOption(yargs)
      .positional("uri", {
        type: "string",
        demandOption: true,
        describe: "s3://bucket/prefix, gs://bucket/prefix, file:///absolute/dir or memory://name",
      })
      .example(
        "ckpt doctor object-store s3://ckpt-archive/runs --credentials credentials/archive.secret",
        "qualify an S3-compatible endpoint; exit 0 when qualified, 1 when not",
      )
      .example(
        "ckpt doctor object-store file:///lustre/ckpt-archive --json",
        "qualify a shared filesystem, report as JSON",
      ),
  async run(args, io) {
    const { openStore, qualify } = await import("@ckpt/object-store");
    // Like every store-touching command: --credentials, then $CKPT_CREDENTIALS, then the config file.
    const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
    const store = await openStore(args.uri, credentials === undefined ? {} : { credentials });
    const report = await qualify(store);
    return {
      exitCode: report.qualified ? 0 : 1,
      report: { ok: report.qualified, ...report },
      human: renderQualification(report),
    };
  },
};

/** The human rendering of a storage probe: the volume, one row per step, the tier's promise, the verdict. */
function renderStorageProbe(
  report: StorageProbeReport,
  verdict: { ok: boolean; reasons: readonly string[] },
  io: Pick<CliIo, "color">,
): string {
  const fs = report.filesystem;
  const where = `${report.dir}: ${fs.type}${fs.mountPoint === undefined ? "" : ` mounted at ${fs.mountPoint}`}${fs.source === undefined ? "" : ` from ${fs.source}`} (${fs.detectedBy})`;
  const rows = report.steps.map((s) => [
    s.name,
    s.ok ? "ok" : "FAIL",
    `${s.durationMs.toFixed(1)} ms`,
    s.detail,
  ]);
  const tier = `${report.tier}${report.known ? "" : " (unknown filesystem type)"}: ${report.promise}`;
  const head = verdict.ok ? paint(io, "green", "sound") : paint(io, "red", "NOT sound");
  return [
    where,
    "",
    table(["step", "result", "time", "detail"], rows),
    "",
    tier,
    "",
    verdict.ok ? `${head}: ckpt's commit sequence holds on this volume.` : `${head}:`,
    ...verdict.reasons.map((r) => `  - ${r}`),
  ].join("\n");
}

const doctorStorageCommand: CkptCommand<StorageArgs> = {
  command: "volume <dir>",
  aliases: ["storage"],
  interruptLeaves:
    "the .ckpt-storage-probe-* file this run created in the directory may be left; run the same command again, and remove it",
  exitCodes: { 1: "not sound: a step failed or the volume breaks --expect" },
  describe:
    "Probe a checkpoint volume: write, fsync, rename, fsync the directory, read back from a second process; local, volatile (tmpfs), shared-safe or shared-unsafe",
  builder: (yargs) =>
    yargs
      .positional("dir", {
        type: "string",
        demandOption: true,
        describe: "The directory checkpoints will be written to (a probe file is created and removed there)",
      })
      .option("expect", {
        choices: ["any", "shared"] as const,
        default: "any" as const,
        describe: "shared: also fail on a local volume (several nodes must read what is written)",
      })
      .example(
        "ckpt doctor volume /lustre/ckpt",
        "exit 0 when the volume is local or shared-safe and every step passed; tmpfs is volatile and fails",
      )
      .example(
        "ckpt doctor volume /mnt/shared/ckpt --expect shared --json",
        "multi-node training: a local volume fails too; report as JSON",
      ),
  async run(args, io) {
    const [{ probeStorage, storageVerdict }, { storageEntry }] = await Promise.all([
      import("@ckpt/diagnostics"),
      import("@ckpt/evidence"),
    ]);
    const report = await probeStorage(args.dir);
    const verdict = storageVerdict(report, args.expect);
    // `storage`: the verdict as the ckpt.evidence.v2 bundle carries a volume's tier.
    const storage = storageEntry(report.dir, report, true, verdict);
    return {
      exitCode: verdict.ok ? 0 : 1,
      report: { ok: verdict.ok, ...report, expect: args.expect, reasons: verdict.reasons, storage },
      human: renderStorageProbe(report, verdict, io),
    };
  },
};

/** `ckpt doctor ...`: qualify where checkpoints go before a run trusts it. */
export const doctorGroup: CkptCommandGroup = {
  command: "doctor <command>",
  describe: "Qualify an object store (object-store) or a checkpoint volume (volume) before trusting it",
  subcommands: [doctorStoreCommand, doctorStorageCommand],
};
