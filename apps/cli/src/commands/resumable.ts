import { stat } from "node:fs/promises";
import type { ResumableReport } from "@ckpt/trainer-checkpoint-manager";
import { UsageError } from "../errors.js";
import type { CkptCommand } from "./registry.js";

interface ResumableArgs {
  "iter-dir": string;
  sha256?: string;
}

function renderResumable(r: ResumableReport): string {
  const lines = [
    r.resumable ? `yes: ${r.reason}` : `no${r.code === null ? "" : ` (${r.code})`}: ${r.reason}`,
  ];
  if (r.resumable) {
    lines.push(`  components: ${Object.keys(r.components).join(", ") || "-"}`);
    if (r.manifestSha256 !== null) lines.push(`  manifest sha256: ${r.manifestSha256}`);
    if (r.validation !== null) lines.push(`  validation: ${r.validation} (resume finishes the transaction)`);
  }
  if (r.latest === false) lines.push("  note: latest_checkpoint.txt of its attempt names another iteration");
  return lines.join("\n");
}

const SHA256 = /^[0-9a-f]{64}$/;

export const resumableCommand: CkptCommand<ResumableArgs> = {
  command: "resumable <iter-dir>",
  exitCodes: { 1: "not resumable (the report says why)" },
  describe: "Would training resume from this checkpoint? yes (exit 0) or no with the reason (exit 1)",
  builder: (yargs) =>
    yargs
      .positional("iter-dir", {
        type: "string",
        demandOption: true,
        describe: "A checkpoints/iter_* directory (or a legacy single .pt checkpoint)",
      })
      .option("sha256", {
        type: "string",
        describe: "Also require its manifest to have this SHA-256 (a pinned resume, resume_sha256)",
      })
      .example(
        "ckpt resumable out/p/g/run/20260901120000/checkpoints/iter_000000100",
        "yes, or no with the reason (incomplete, behind a committed artifact, ...)",
      )
      .example(
        "ckpt resumable ./iter_000000100 --sha256 3f5a...e1 --json",
        "the pinned check, as a JSON report",
      ),
  async run(args) {
    const path = args["iter-dir"];
    const pin = args.sha256?.toLowerCase() ?? null;
    if (pin !== null && !SHA256.test(pin)) {
      throw new UsageError(`--sha256 ${args.sha256}: expected 64 hexadecimal digits`);
    }
    const exists = await stat(path).then(
      () => true,
      () => false,
    );
    if (!exists) throw new UsageError(`${path} does not exist; pass a checkpoints/iter_* directory`);
    const [{ checkResumable }, { libraryProblem }] = await Promise.all([
      import("@ckpt/trainer-checkpoint-manager"),
      import("@ckpt/evidence"),
    ]);
    const report = await checkResumable(path, pin);
    // `evidence_problems`: the refusal in the ckpt.evidence.v2 closed set (its code kept as `cause`).
    const evidenceProblems =
      report.code === null ? [] : [libraryProblem(report.code, report.path, report.reason)];
    return {
      exitCode: report.resumable ? 0 : 1,
      report: { ...report, evidence_problems: evidenceProblems },
      human: renderResumable(report),
    };
  },
};
