import type { DemoReport } from "../demo/run-demo.js";
import { UsageError } from "../errors.js";
import { createProgress } from "../progress.js";
import { formatBytes, table } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface DemoArgs {
  dir: string;
  fault: "kill" | "torn" | "short" | "clean";
  clean: boolean;
  "dry-run": boolean;
  worker?: string;
}

const MARK: Record<string, string> = { ok: "ok", skipped: "..", failed: "!!" };

/** A step's mark: a resume the manager refused (or could not load) is its answer, never `[ok]`. */
function stepMark(step: DemoReport["steps"][number], report: DemoReport): string {
  const resume = report.resume;
  const refused = resume?.decision.kind === "refused" || resume?.load?.ok === false;
  return step.id === "resume" && step.status === "ok" && refused ? "no" : MARK[step.status]!;
}

/** Paths inside the demo directory written relative to it (also as file:// URIs). Pure. */
function relativeToDemo(text: string, dir: string): string {
  return text.replaceAll(`file://${dir}/`, "").replaceAll(`${dir}/`, "").replaceAll(dir, ".");
}

/** Commands to run next, from inside the demo directory, on what the demo left. Pure. */
function whatNext(report: DemoReport): string[] {
  const where = (prefix: string) => report.inventory.find((r) => r.what.startsWith(prefix))?.where;
  const latest = where("latest full checkpoint");
  const staged = where("staged artifact");
  const hf = where("materialized HF");
  const dir = (path: string) => path.slice(0, path.lastIndexOf("/"));
  const commands: Array<[string, string]> = [];
  if (latest !== undefined) {
    commands.push([
      `ckpt run status ${latest.split("/checkpoints/")[0]}`,
      "every checkpoint, and what resume picks",
    ]);
    commands.push([`ckpt verify ${dir(latest)}`, "prove the latest checkpoint's bytes"]);
  }
  if (staged !== undefined)
    commands.push([`ckpt fingerprint ${dir(staged)}`, "the fetched artifact's identity"]);
  if (hf !== undefined)
    commands.push([`ckpt inspect ${dir(hf)}`, "the Hugging Face export, tensor by tensor"]);
  commands.push([`ckpt demo --dir ${report.dir} --clean`, "remove everything the demo made"]);
  const width = Math.max(...commands.map(([c]) => c.length));
  return [`what next (from ${report.dir}):`, ...commands.map(([c, why]) => `  ${c.padEnd(width)}  # ${why}`)];
}

/** The human rendering: one line per step, what resume did about the fault, the inventory, what next. */
export function renderDemo(report: DemoReport): string {
  const rel = (text: string) => relativeToDemo(text, report.dir);
  const lines = report.steps.map((s) => `[${stepMark(s, report)}] ${s.title}\n     ${rel(s.summary)}`);
  if (report.resume) {
    const d = report.resume.decision;
    lines.push(
      "",
      `fault ${report.fault}: ${rel(report.resume.fault.what)}`,
      rel(
        d.kind === "checkpoint"
          ? `resume decision: iteration ${d.iteration} — ${d.reason}`
          : d.kind === "fresh"
            ? `resume decision: start fresh — ${d.reason}`
            : `resume decision: refused (${d.code}) — ${d.reason}`,
      ),
    );
    const load = report.resume.load;
    if (load && !load.ok)
      lines.push(rel(`loading the chosen checkpoint failed (${load.code}): ${load.reason}`));
  }
  if (report.inventory.length > 0) {
    lines.push(
      "",
      table(
        ["what", "where", "size", "sha256", "proven by"],
        report.inventory.map((r) => [
          r.what,
          r.where,
          formatBytes(r.bytes),
          r.sha256 ? r.sha256.slice(0, 12) : "-",
          r.verified,
        ]),
        new Set([2]),
      ),
    );
  }
  const marks = report.steps.map((s) => stepMark(s, report));
  const counts = (
    [
      ["ok", "ok"],
      ["no", "refused"],
      ["..", "skipped"],
      ["!!", "failed"],
    ] as const
  )
    .map(([mark, word]) => [word, marks.filter((m) => m === mark).length] as const)
    .filter(([, n]) => n > 0)
    .map(([word, n]) => `${n} ${word}`)
    .join(", ");
  lines.push("", `${counts} in ${(report.wall_ms / 1000).toFixed(1)} s; everything is under ${report.dir}`);
  if (report.ok) lines.push("", ...whatNext(report));
  return lines.join("\n");
}

export const demoCommand: CkptCommand<DemoArgs> = {
  command: "demo",
  interruptLeaves:
    "the demo directory keeps what was made so far; run the same command again, or ckpt demo --clean to remove it",
  describe:
    "Train a small model for real and take its checkpoints through a fault, resume, the archive, a merge and a Hugging Face export",
  builder: (yargs) =>
    yargs
      .option("dir", {
        type: "string",
        default: "ckpt-demo",
        describe:
          "Where everything goes; created by the demo (an existing directory it did not create is refused)",
      })
      .option("fault", {
        choices: ["kill", "torn", "short", "clean"] as const,
        default: "kill" as const,
        describe:
          "kill: SIGKILL the trainer mid-save; torn: optim.pt half zeroed; short: model.pt truncated; clean: none",
      })
      .option("clean", {
        type: "boolean",
        default: false,
        describe: "Remove what an earlier demo made in --dir, and nothing else",
      })
      .option("dry-run", {
        type: "boolean",
        default: false,
        describe: "With --clean: say what would be removed and kept, and remove nothing",
      })
      .option("worker", { type: "string", hidden: true })
      .example("ckpt demo", "the whole life of a checkpoint in ./ckpt-demo, with a SIGKILL mid-save")
      .example("ckpt demo --dir /tmp/d --fault torn --json", "a torn component file; the report as JSON")
      .example("ckpt demo --dir /tmp/d --clean", "remove the demo's directory")
      .example("ckpt demo --dir /tmp/d --clean --dry-run", "what --clean would remove and keep"),
  async run(args, io) {
    if (args.worker !== undefined) {
      // The demo's own child process (see demo/worker.ts): it reports on stdout as JSON lines.
      const { runWorker } = await import("../demo/worker.js");
      const exitCode = await runWorker(args.worker, io.stdout);
      return { exitCode: exitCode === 0 ? 0 : 1, report: { ok: exitCode === 0 }, human: "" };
    }
    if (args["dry-run"] && !args.clean) {
      throw new UsageError(
        "--dry-run applies to --clean only (a demo run writes only in its own directory).",
      );
    }
    const { cleanDemoDir, DEMO_MARKER_FILE, prepareDemoDir } = await import("../demo/directory.js");
    if (args.clean) {
      const cleaned = await cleanDemoDir(args.dir, { dryRun: args["dry-run"] });
      const kept =
        cleaned.left.length === 0 ? "" : `; would keep ${cleaned.left.join(", ")} (not the demo's)`;
      return {
        exitCode: 0,
        report: { ok: true, dir: args.dir, ...cleaned },
        human: cleaned.dry_run
          ? `dry run: would remove ${cleaned.would_remove?.join(", ") || "nothing"} from ${args.dir} (the demo made them: ${DEMO_MARKER_FILE})${kept}`
          : cleaned.removed
            ? `removed ${args.dir}`
            : `removed the demo's files from ${args.dir}; kept what the demo did not make: ${cleaned.left.join(", ")}`,
      };
    }
    const { DEMO_STEP_COUNT, runDemo } = await import("../demo/run-demo.js");
    await prepareDemoDir(args.dir);
    const progress = createProgress(io, "demo", { quiet: args.quiet || args.json, unit: "items" });
    const steps = DEMO_STEP_COUNT;
    let finished = 0;
    let report: DemoReport;
    try {
      report = await runDemo({
        dir: args.dir,
        fault: args.fault,
        onEvent: (event) => {
          // One bar over the demo's steps; a long step adds where it is within itself.
          if (event.type === "step") {
            finished = event.index;
            progress.update(finished, event.total, event.step.title);
          } else {
            progress.update(finished, steps, `${event.label}: iteration ${event.done} of ${event.total}`);
          }
        },
      });
    } finally {
      progress.finish();
    }
    return { exitCode: report.ok && report.complete ? 0 : 1, report, human: renderDemo(report) };
  },
};
