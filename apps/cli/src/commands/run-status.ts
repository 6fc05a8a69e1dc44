import type { CheckpointStatus, RunStatusReport } from "@ckpt/trainer-checkpoint-manager";
import { requireAttemptDir } from "../attempt-dir.js";
import { formatBytes, table } from "../render.js";
import type { CkptCommandGroup, CkptCommand } from "./registry.js";

interface RunStatusArgs {
  "attempt-dir": string;
}

function stateOf(c: CheckpointStatus): string {
  if (c.latest) return c.complete ? "latest" : "latest, INCOMPLETE";
  if (c.pastPointer) return "not committed";
  if (c.complete === null) return "older, not probed";
  return c.complete ? "complete" : "not resumable";
}

function componentList(c: CheckpointStatus): string {
  const names = c.components.map(
    (x) => `${x.name}${x.kind === "directory" ? "/" : ""}${x.present ? "" : "(missing)"}`,
  );
  return names.join(",") || "-";
}

function renderRunStatus(r: RunStatusReport): string {
  const pointer =
    r.pointer.state === "present"
      ? `iteration ${r.pointer.iteration}`
      : r.pointer.state === "absent"
        ? "none"
        : `INVALID (${r.pointer.message})`;
  const resume =
    r.resume.decision === "checkpoint"
      ? `iteration ${r.resume.iteration ?? "?"} (${r.resume.reason})`
      : r.resume.decision === "fresh"
        ? `a fresh start (${r.resume.reason})`
        : `REFUSED ${r.resume.code}: ${r.resume.reason}`;
  const lines = [r.attemptDir, `latest_checkpoint.txt: ${pointer}`, `resume=auto would pick: ${resume}`];
  if (r.checkpoints.length > 0) {
    lines.push(
      "",
      table(
        ["checkpoint", "state", "components", "size", "upload", "validation"],
        r.checkpoints.map((c) => [
          String(c.iteration),
          stateOf(c),
          c.complete === null ? "-" : componentList(c),
          c.complete === null ? "-" : formatBytes(c.bytes),
          c.upload,
          c.validation ?? "-",
        ]),
        new Set([0, 3]),
      ),
    );
  } else {
    lines.push("", "no checkpoints");
  }
  if (r.artifacts.length > 0) {
    lines.push(
      "",
      table(
        ["artifact", "components", "payload", "local", "archived to"],
        r.artifacts.map((a) => [
          String(a.iteration),
          a.components.join(","),
          formatBytes(a.bytes),
          a.local,
          a.archivedTo ?? "-",
        ]),
        new Set([0, 2]),
      ),
    );
  }
  for (const p of r.pendingValidation)
    lines.push(`pending validation: iteration ${p.iteration} (${p.state})`);
  for (const c of r.checkpoints.filter((x) => x.complete === false && !x.pastPointer)) {
    lines.push(`iteration ${c.iteration}: ${c.problems.join("; ")}`);
  }
  lines.push("", r.problems.length === 0 ? "no problems" : `${r.problems.length} problem(s):`);
  for (const p of r.problems) lines.push(`  ${p.code} ${p.subject}: ${p.message}`);
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
    await requireAttemptDir(dir);
    const { runStatus } = await import("@ckpt/trainer-checkpoint-manager");
    const report = await runStatus(dir);
    return { exitCode: report.ok ? 0 : 1, report, human: renderRunStatus(report) };
  },
};

/** `ckpt run ...`: training run attempts as the checkpoint manager sees them. */
export const runGroup: CkptCommandGroup = {
  command: "run <command>",
  describe: "Inspect a training run attempt",
  subcommands: [runStatusCommand],
};
