import type { Evidence, EvidenceAttempt, EvidenceCheckpoint, EvidenceProblem } from "@ckpt/evidence";
import { requireAttemptDir } from "../attempt-dir.js";
import { formatBytes, table } from "../render.js";
import type { CkptCommandGroup, CkptCommand } from "./registry.js";

interface RunStatusArgs {
  "attempt-dir": string;
}

/** `ckpt run status --json` (and the MCP server's status tool): one attempt in the ckpt.evidence.v2 model. */
export interface AttemptStatus {
  /** No problem of error severity. */
  readonly ok: boolean;
  readonly schema: Evidence["schema"];
  /** False when a bound cut the collection short (its problem says where). */
  readonly complete: boolean;
  /** The attempt as the v2 bundle holds it: pointer, resume decision, checkpoints, artifacts (null: cut short before it). */
  readonly attempt: EvidenceAttempt | null;
  readonly problems: readonly EvidenceProblem[];
}

/** A run attempt at a glance: its entry of the v2 bundle and the bundle's problems; `signal` cancels the collection. */
export async function attemptStatus(attemptDir: string, signal?: AbortSignal): Promise<AttemptStatus> {
  await requireAttemptDir(attemptDir);
  const { buildEvidence, withoutErrors } = await import("@ckpt/evidence");
  const { schema, complete, attempts, problems } = await buildEvidence(
    attemptDir,
    signal === undefined ? {} : { signal },
  );
  return { ok: withoutErrors(problems), schema, complete, attempt: attempts[0] ?? null, problems };
}

function stateOf(c: EvidenceCheckpoint): string {
  const complete = c.resume.resumable;
  if (c.retention.latest) return complete ? "latest" : "latest, INCOMPLETE";
  if (c.retention.past_pointer) return "not committed";
  // Retention state in the words `evidence` and `verify` use.
  const released = c.retention.has_optimizer ? "" : ", optimizer released";
  if (complete === null) return `older, not probed${released}`;
  return complete ? "complete" : `not resumable${released}`;
}

function componentList(c: EvidenceCheckpoint): string {
  const names = c.components.map(
    (x) => `${x.name}${x.kind === "directory" ? "/" : ""}${x.present ? "" : "(missing)"}`,
  );
  return names.join(",") || "-";
}

function renderRunStatus(dir: string, r: AttemptStatus): string {
  const a = r.attempt;
  const lines = [a?.dir ?? dir];
  if (a !== null) {
    const pointer =
      a.pointer.state === "present"
        ? `iteration ${a.pointer.iteration}`
        : a.pointer.state === "absent"
          ? "none"
          : `INVALID (${a.pointer.message})`;
    const resume =
      a.resume.decision === "checkpoint"
        ? `iteration ${a.resume.iteration ?? "?"} (${a.resume.reason})`
        : a.resume.decision === "fresh"
          ? `a fresh start (${a.resume.reason})`
          : a.resume.decision === "refused"
            ? `REFUSED ${a.resume.code}: ${a.resume.reason}`
            : `unknown (${a.resume.reason})`;
    lines.push(`latest_checkpoint.txt: ${pointer}`, `resume=auto would pick: ${resume}`);
    if (a.checkpoints.length > 0) {
      lines.push(
        "",
        table(
          ["checkpoint", "state", "components", "size", "upload", "validation"],
          a.checkpoints.map((c) => [
            String(c.iteration),
            stateOf(c),
            componentList(c),
            formatBytes(c.bytes),
            c.retention.upload,
            c.retention.validation ?? "-",
          ]),
          new Set([0, 3]),
        ),
      );
    } else {
      lines.push("", "no checkpoints");
    }
    if (a.artifacts.length > 0) {
      lines.push(
        "",
        table(
          ["artifact", "components", "payload", "local", "archived to"],
          a.artifacts.map((x) => [
            String(x.iteration),
            x.components.join(","),
            formatBytes(x.bytes),
            x.retention.local,
            x.archive?.destination ?? "-",
          ]),
          new Set([0, 2]),
        ),
      );
    }
    for (const c of a.checkpoints) {
      const state = c.retention.validation;
      if (state !== null && state !== "published")
        lines.push(`pending validation: iteration ${c.iteration} (${state})`);
    }
    for (const c of a.checkpoints.filter((x) => x.resume.resumable === false && !x.retention.past_pointer)) {
      lines.push(`iteration ${c.iteration}: ${c.resume.findings.join("; ")}`);
    }
  }
  lines.push("", r.problems.length === 0 ? "no problems" : `${r.problems.length} problem(s):`);
  for (const p of r.problems)
    lines.push(`  ${p.code}${p.cause === null ? "" : ` (${p.cause})`} ${p.subject}: ${p.message}`);
  if (!r.complete) lines.push("incomplete: a bound cut the collection short (see the problems)");
  return lines.join("\n");
}

const runStatusCommand: CkptCommand<RunStatusArgs> = {
  command: "status <attempt-dir>",
  exitCodes: { 1: "the run has a problem (the report names it)" },
  describe:
    "A run attempt at a glance: checkpoints, components, sizes, pointer, receipts, pending validation, and what resume would pick and why",
  builder: (yargs) =>
    yargs
      .positional("attempt-dir", {
        type: "string",
        demandOption: true,
        describe: "The run attempt directory <output_root>/<project>/<group>/<name>/<RUN_TS>",
      })
      .example("ckpt run status out/p/g/run/20260901120000", "the table and the resume decision")
      .example("ckpt run status out/p/g/run/20260901120000 --json", "the same as a JSON report"),
  async run(args) {
    const dir = args["attempt-dir"];
    const report = await attemptStatus(dir);
    return { exitCode: report.ok ? 0 : 1, report, human: renderRunStatus(dir, report) };
  },
};

/** `ckpt run ...`: training run attempts as the checkpoint manager sees them. */
export const runGroup: CkptCommandGroup = {
  command: "run <command>",
  describe: "Inspect a training run attempt",
  subcommands: [runStatusCommand],
};
