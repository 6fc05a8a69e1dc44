import type { Evidence } from "@ckpt/evidence";
import { requireRunOrAttemptDir } from "../attempt-dir.js";
import { formatBytes, table } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface EvidenceArgs {
  dir: string;
  verify: "none" | "newest" | "all";
  "probe-storage": boolean;
  "max-entries": number;
  "timeout-ms": number;
}

const verified = (v: { ok: boolean } | null) => (v === null ? "-" : v.ok ? "ok" : "FAIL");

/** A short human summary; the bundle itself is the `--json` report. */
function renderEvidence(bundle: Evidence): string {
  const lines = [
    `${bundle.root}: ${bundle.status} (run ${bundle.run.name}, ${bundle.attempts.length} attempts)`,
  ];
  if (bundle.storage !== null) {
    const s = bundle.storage;
    lines.push(
      `storage: ${s.tier} (${s.filesystem}${s.probed ? ", probed" : ", by filesystem type"}): ${s.ok ? "sound" : s.reasons.join("; ")}`,
    );
  }
  for (const a of bundle.attempts) {
    const r = a.resume;
    lines.push(
      "",
      `attempt ${a.run_ts || "(legacy layout)"} (${a.minted}${a.minted_at === null ? "" : `, ${a.minted_at}`})`,
      r.decision === "checkpoint"
        ? `resume: iteration ${r.iteration} (${r.reason})`
        : r.decision === "refused"
          ? `resume refused (${r.code}): ${r.reason}`
          : `resume: ${r.decision} (${r.reason})`,
    );
    if (a.checkpoints.length > 0)
      lines.push(
        table(
          ["checkpoint", "format", "size", "resumable", "optimizer", "upload", "latest", "verified"],
          a.checkpoints.map((c) => [
            String(c.iteration),
            c.format ?? "?",
            formatBytes(c.bytes),
            c.resume.resumable === null ? "-" : c.resume.resumable ? "yes" : "NO",
            c.retention.has_optimizer ? "yes" : "released",
            c.retention.upload,
            c.retention.latest ? "yes" : "",
            verified(c.last_verify),
          ]),
        ),
      );
    if (a.artifacts.length > 0)
      lines.push(
        table(
          ["artifact", "components", "payload", "local", "archived to", "verified"],
          a.artifacts.map((x) => [
            String(x.iteration),
            x.components.join(",") || "?",
            formatBytes(x.bytes),
            x.retention.local,
            x.archive?.destination ?? "-",
            verified(x.last_verify),
          ]),
        ),
      );
  }
  lines.push(
    "",
    bundle.problems.length === 0 ? "no problems reported" : `${bundle.problems.length} problems:`,
  );
  for (const p of bundle.problems) {
    lines.push(
      `  ${p.code} (${p.severity}${p.cause === null ? "" : `, ${p.cause}`}) ${p.subject}: ${p.message}`,
    );
    lines.push(`    remedy: ${p.remedy}`);
  }
  if (!bundle.complete) lines.push("", "incomplete: a bound cut the collection short (see the problems)");
  return lines.join("\n");
}

export const evidenceCommand: CkptCommand<EvidenceArgs> = {
  command: "evidence <dir>",
  exitCodes: { 1: "a problem of error severity (warnings do not fail it)" },
  describe:
    "The ckpt.evidence.v2 bundle of a run or one attempt: attempts, checkpoints and artifacts (resumable, retention, archive, verify), the volume's tier, problems from a closed set",
  builder: (yargs) =>
    yargs
      .positional("dir", {
        type: "string",
        demandOption: true,
        describe:
          "A run directory <root>/<project>/<group>/<name> (every attempt) or one attempt <name>/<RUN_TS>",
      })
      .option("verify", {
        choices: ["none", "newest", "all"] as const,
        default: "none" as const,
        describe:
          "Verify (as ckpt verify) each attempt's resume checkpoint and newest artifact, or all of them",
      })
      .option("probe-storage", {
        type: "boolean",
        default: false,
        describe: "Run ckpt doctor volume's probe on the run's volume (writes and removes one file there)",
      })
      .option("max-entries", {
        type: "number",
        default: 20_000,
        describe: "Entries read from one directory before the rest is left out (TREE_TOO_LARGE)",
      })
      .option("timeout-ms", {
        type: "number",
        default: 30_000,
        describe: "Bound on the whole collection; past it the bundle is printed with TIMED_OUT",
      })
      .example(
        "ckpt evidence out/vlm/grpo/run-a/20260901120000 --json > evidence.json",
        "attach the bundle to a ticket",
      )
      .example(
        "ckpt evidence out/vlm/grpo/run-a --verify newest",
        "every attempt of a run, resume sources verified",
      )
      .example("ckpt evidence ckpt-demo/runs/demo/mlp/main", "the demo's main run, summarised"),
  async run(args) {
    const { buildEvidence, withoutErrors } = await import("@ckpt/evidence");
    await requireRunOrAttemptDir(args.dir);
    const bundle = await buildEvidence(args.dir, {
      verify: args.verify,
      probeStorage: args["probe-storage"],
      maxEntries: args["max-entries"],
      timeoutMs: args["timeout-ms"],
    });
    const ok = withoutErrors(bundle.problems);
    return { exitCode: ok ? 0 : 1, report: { ok, ...bundle }, human: renderEvidence(bundle) };
  },
};
