import type { VerifyKind, VerifyReport } from "@ckpt/verify";
import { VERIFY_KINDS } from "@ckpt/verify";
import type { CliIo } from "../io.js";
import { createProgress } from "../progress.js";
import { formatBytes, paint, table } from "../render.js";
import type { CkptCommand } from "./registry.js";

export type { VerifyReport } from "@ckpt/verify";

interface VerifyArgs {
  path: string;
  kind?: VerifyKind;
  finite: boolean;
  deep: boolean;
}

/** The closed set of problem codes a verify report can hold (@ckpt/verify's, loaded lazily like every library). */
export async function verifyProblemCodes(): Promise<string[]> {
  return [...(await import("@ckpt/verify")).VERIFY_REPORT_PROBLEM_CODES];
}

/** A verdict line, then the problems as a table, then what was released and the notes. */
function renderVerifyReport(report: VerifyReport, io: Pick<CliIo, "color">): string {
  const what = `${report.kind}${report.iteration === null ? "" : ` (iteration ${report.iteration})`}`;
  const hashed =
    report.hashed.files > 0
      ? `, ${report.hashed.files} files hashed (${formatBytes(report.hashed.bytes)})`
      : "";
  const lines: string[] = [];
  if (report.ok) {
    lines.push(`${report.path}: ${what} ${paint(io, "green", "sound")}${hashed}`);
  } else {
    const n = report.problems.length;
    lines.push(`${report.path}: ${what} ${paint(io, "red", `${n} PROBLEM${n === 1 ? "" : "S"}`)}${hashed}`);
    lines.push(
      "",
      table(
        ["code", "path", "detail"],
        report.problems.map((p) => [p.code, p.path, p.message]),
      ),
    );
  }
  if (report.released.length > 0) {
    const where = report.archive
      ? ` (archived in ${report.archive.scheme}://${report.archive.bucket}/${report.archive.prefix})`
      : "";
    lines.push("", `released after archiving${where}: ${report.released.join(", ")}`);
    lines.push("check the archive itself with `ckpt artifact verify --artifact-dir <dir>`");
  }
  if (report.retention !== null && report.retention.optimizer_released.length > 0) {
    lines.push(
      "",
      `retention: optimizer released (keep_optim_last): ${report.retention.optimizer_released.join(", ")}; weights and trainer state are checked, an exact resume needs a checkpoint that still holds its optimizer`,
    );
  }
  if (report.size_only.length > 0)
    lines.push("", `no digest recorded, size checked: ${report.size_only.join(", ")}`);
  for (const note of report.notes) lines.push(`note: ${note}`);
  return lines.join("\n");
}

export const verifyCommand: CkptCommand<VerifyArgs> = {
  command: "verify <path>",
  exitCodes: { 1: "a problem found (the report names each)" },
  describe:
    "Judge a checkpoint, artifact, fetched stage, DCP or Hugging Face directory, or a .pt/.safetensors file, against its own records",
  builder: (yargs) =>
    yargs
      .positional("path", {
        type: "string",
        demandOption: true,
        describe: "What to judge; its kind is detected from its name and the records in it",
      })
      .option("kind", {
        choices: VERIFY_KINDS,
        describe: "Judge the path as this kind instead of detecting it",
      })
      .option("finite", {
        type: "boolean",
        default: false,
        describe: "Also read every floating tensor of .pt/.safetensors files and report NaN/Inf (streaming)",
      })
      .option("deep", {
        type: "boolean",
        default: false,
        describe: "Also read every byte of .pt files and check each zip member's CRC-32",
      })
      .example(
        "ckpt verify run/20260901120000/checkpoint_artifacts/iter_000000300",
        "every payload present with the size and sha256 its manifest records; exit 0 sound, 1 problems, 2 unusable input",
      )
      .example("ckpt verify model.safetensors --finite --json", "NaN/Inf scan of one file, as a JSON report")
      .example(
        "ckpt verify run/20260901120000/checkpoints/iter_000000100 --deep",
        "a full checkpoint: components present, .pt files intact (CRC-32), DCP shards long enough",
      ),
  async run(args, io) {
    const { verifyPath } = await import("@ckpt/verify");
    const progress = createProgress(io, "verify");
    let report: VerifyReport;
    try {
      report = await verifyPath(args.path, {
        ...(args.kind ? { kind: args.kind } : {}),
        finite: args.finite,
        deep: args.deep,
        onProgress: (e) => progress.update(e.doneBytes, e.totalBytes, e.path),
      });
    } finally {
      progress.finish();
    }
    const { libraryProblem } = await import("@ckpt/evidence");
    // `evidence_problems`: the same problems in the ckpt.evidence.v2 closed set (the code kept as `cause`).
    const evidenceProblems = report.problems.map((p) => libraryProblem(p.code, p.path, p.message));
    return {
      exitCode: report.ok ? 0 : 1,
      report: { ...report, evidence_problems: evidenceProblems },
      human: renderVerifyReport(report, io),
    };
  },
};
