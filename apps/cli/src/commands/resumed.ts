import { requireAttemptDir } from "../attempt-dir.js";
import { UsageError } from "../errors.js";
import type { CkptCommand } from "./registry.js";

interface ResumedArgs {
  attemptDir: string;
  "reported-step": number;
  "started-at"?: string;
}

export const resumedCommand: CkptCommand<ResumedArgs> = {
  command: "resumed",
  describe:
    "Did the job come back where it should? Its reported step against the newest complete checkpoint at its start; exit 1 when behind (step 0) or ahead",
  builder: (yargs) =>
    yargs
      .option("attempt-dir", {
        // Its earlier name; run status and evidence take the same directory.
        alias: "attempt",
        type: "string",
        demandOption: true,
        describe: "The run attempt directory <root>/<project>/<group>/<name>/<RUN_TS>",
      })
      .option("reported-step", {
        type: "number",
        demandOption: true,
        describe: "The step the job says it resumed at (0: it started over)",
      })
      .option("started-at", {
        type: "string",
        describe: "When the job started (ISO 8601); checkpoints committed later do not count (default: now)",
      })
      .example(
        "ckpt resumed --attempt-dir out/p/g/run/20260901120000 --reported-step 0 --started-at 2026-09-02T08:00:00Z",
        "came back at step 0 although a checkpoint was complete: exit 1, one sentence",
      ),
  async run(args) {
    const step = args["reported-step"];
    if (!Number.isSafeInteger(step) || step < 0)
      throw new UsageError(`--reported-step ${step}: expected a step, an integer 0 or more`);
    const startedAt = args["started-at"] === undefined ? undefined : new Date(args["started-at"]);
    if (startedAt !== undefined && Number.isNaN(startedAt.getTime()))
      throw new UsageError(
        `--started-at ${args["started-at"]}: expected an ISO 8601 time (2026-09-02T08:00:00Z)`,
      );
    await requireAttemptDir(args.attemptDir);
    const { checkResumed } = await import("@ckpt/evidence");
    const report = await checkResumed(args.attemptDir, step, startedAt === undefined ? {} : { startedAt });
    return { exitCode: report.ok ? 0 : 1, report, human: report.sentence };
  },
};
