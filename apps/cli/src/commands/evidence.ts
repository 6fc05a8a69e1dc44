import type { archivedTo, artifactLocality, EvidenceBundle } from "@ckpt/trainer-checkpoint-manager";
import { requireAttemptDir } from "../attempt-dir.js";
import { formatBytes, table } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface EvidenceArgs {
  "attempt-dir": string;
}

/** How an artifact's locality and archive are worded (the library's helpers, loaded on demand). */
interface ArtifactWording {
  readonly artifactLocality: typeof artifactLocality;
  readonly archivedTo: typeof archivedTo;
}

/** A short human summary; the bundle itself is the `--json` report. */
function renderEvidence(bundle: EvidenceBundle, wording: ArtifactWording): string {
  const r = bundle.resume;
  const lines = [
    `${bundle.attemptDir}: ${bundle.status}`,
    r.kind === "checkpoint"
      ? `resume: iteration ${r.iteration} (${r.reason})`
      : r.kind === "fresh"
        ? `resume: fresh start (${r.reason})`
        : `resume refused (${r.code}): ${r.message}`,
  ];
  if (bundle.checkpoints.length > 0) {
    lines.push(
      "",
      table(
        ["checkpoint", "optimizer", "upload", "latest"],
        bundle.checkpoints.map((c) => [
          String(c.iteration),
          c.hasOptimizer ? "yes" : "released",
          c.uploaded,
          c.isLatest ? "yes" : "",
        ]),
      ),
    );
  }
  if (bundle.artifacts.length > 0) {
    lines.push(
      "",
      table(
        ["artifact", "components", "payload", "local", "archived to"],
        bundle.artifacts.map((a) => [
          String(a.iteration),
          a.logicalComponents?.join(",") ?? "?",
          formatBytes(a.payloads.reduce((s, p) => s + p.size, 0)),
          wording.artifactLocality(a),
          wording.archivedTo(a) ?? "-",
        ]),
      ),
    );
  }
  lines.push(
    "",
    bundle.problems.length === 0 ? "no problems reported" : `${bundle.problems.length} problems:`,
  );
  for (const p of bundle.problems) lines.push(`  ${p.code} ${p.subject}: ${p.message}`);
  return lines.join("\n");
}

export const evidenceCommand: CkptCommand<EvidenceArgs> = {
  command: "evidence <attempt-dir>",
  exitCodes: { 1: "the bundle names a problem" },
  describe:
    "One JSON bundle of a run attempt: resume decision, newest checkpoint, retention state, artifacts and receipts, problems",
  builder: (yargs) =>
    yargs
      .positional("attempt-dir", {
        type: "string",
        demandOption: true,
        describe: "The run attempt directory <root>/<project>/<group>/<name>/<RUN_TS>",
      })
      .example(
        "ckpt evidence out/vlm/grpo/run-a/20260901120000 --json > evidence.json",
        "attach the bundle to a ticket",
      )
      .example("ckpt evidence ckpt-demo/runs/demo/mlp/main/*", "the demo's main run, summarised"),
  async run(args) {
    const { collectEvidence, artifactLocality, archivedTo } = await import(
      "@ckpt/trainer-checkpoint-manager"
    );
    const dir = args["attempt-dir"];
    await requireAttemptDir(dir);
    const bundle = await collectEvidence(dir);
    // The bundle reports; the exit code says whether anything in it is a problem.
    return {
      exitCode: bundle.problems.length === 0 ? 0 : 1,
      report: { ok: bundle.problems.length === 0, ...bundle },
      human: renderEvidence(bundle, { artifactLocality, archivedTo }),
    };
  },
};
