import type { QualificationReport } from "@ckpt/object-store";
import { table } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface DoctorArgs {
  check: "store";
  uri: string;
  credentials?: string;
}

/** The human rendering of a qualification report: the destination, one row per check, a verdict. */
export function renderQualification(report: QualificationReport): string {
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

export const doctorCommand: CkptCommand<DoctorArgs> = {
  command: "doctor <check> <uri>",
  describe: "Check that a destination can hold ckpt archives (conditional create, digests, multipart, ...)",
  builder: (yargs) =>
    yargs
      .positional("check", {
        type: "string",
        choices: ["store"],
        demandOption: true,
        describe: "What to check: 'store' qualifies an object store with probe objects it removes afterwards",
      })
      .positional("uri", {
        type: "string",
        demandOption: true,
        describe: "s3://bucket/prefix, gs://bucket/prefix, file:///absolute/dir or memory://name",
      })
      .option("credentials", {
        type: "string",
        describe:
          "JSON file {aws_access_key_id, aws_secret_access_key, endpoint_url, region_name} (the same as rl.upload.credentials)",
      })
      .example(
        "ckpt doctor store s3://ckpt-archive/runs --credentials credentials/archive.secret",
        "qualify an S3-compatible endpoint; exit 0 when qualified, 1 when not",
      )
      .example(
        "ckpt doctor store file:///lustre/ckpt-archive --json",
        "qualify a shared filesystem, report as JSON",
      ),
  async run(args) {
    const { openStore, qualify } = await import("@ckpt/object-store");
    const store = await openStore(args.uri, {
      ...(args.credentials === undefined ? {} : { credentials: args.credentials }),
    });
    const report = await qualify(store);
    return {
      exitCode: report.qualified ? 0 : 1,
      report: { ok: report.qualified, ...report },
      human: renderQualification(report),
    };
  },
};
