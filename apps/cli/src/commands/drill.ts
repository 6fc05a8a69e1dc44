import { stat } from "node:fs/promises";
import type { DrillReport } from "@ckpt/evidence";
import { UsageError } from "../errors.js";
import { table } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface DrillArgs {
  checkpoint: string;
  python?: string;
}

const load = (l: DrillReport["components"][number]["ckpt"] | null) =>
  l === null
    ? "-"
    : l.ok
      ? `ok${l.tensors === null ? "" : `, ${l.tensors} tensors`} (${Math.round(l.duration_ms)} ms)`
      : "FAILED";

function renderDrill(r: DrillReport): string {
  const lines = [
    `${r.dir}: ${r.ok ? "drill passed" : "drill FAILED"}${r.iteration === null ? "" : ` (iteration ${r.iteration})`}`,
    `fingerprint before ${r.fingerprint_before ?? "-"}`,
    `fingerprint after  ${r.fingerprint_after ?? "-"}${r.unchanged ? " (unchanged)" : " (CHANGED)"}`,
  ];
  if (r.components.length > 0)
    lines.push(
      "",
      table(
        ["component", "kind", "ckpt readers", "torch"],
        r.components.map((c) => [c.name, c.kind, load(c.ckpt), load(c.torch)]),
      ),
    );
  for (const p of r.problems)
    lines.push(`  ${p.code}${p.cause === null ? "" : ` (${p.cause})`} ${p.subject}: ${p.message}`);
  return lines.join("\n");
}

export const drillCommand: CkptCommand<DrillArgs> = {
  command: "drill <checkpoint>",
  describe:
    "Load every component of a checkpoint once (ckpt's readers, and torch's with --python), fingerprinting it before and after; exit 1 when a load fails or the checkpoint changed",
  builder: (yargs) =>
    yargs
      .positional("checkpoint", {
        type: "string",
        demandOption: true,
        describe: "A checkpoints/iter_* directory",
      })
      .option("python", {
        type: "string",
        describe:
          "A Python with torch: also load each component with torch.load(weights_only=True) or DCP's loader",
      })
      .example(
        "ckpt drill out/p/g/run/20260901120000/checkpoints/iter_000000100",
        "every component loaded through ckpt's readers",
      )
      .example(
        "ckpt drill ./iter_000000100 --python .venv/bin/python --json",
        "and through torch itself, as a JSON report",
      ),
  async run(args) {
    const info = await stat(args.checkpoint).catch(() => undefined);
    if (!info?.isDirectory())
      throw new UsageError(`${args.checkpoint} is not a directory; pass a checkpoints/iter_* directory`);
    const { drillCheckpoint } = await import("@ckpt/evidence");
    const report = await drillCheckpoint(
      args.checkpoint,
      args.python === undefined ? {} : { python: args.python },
    );
    return { exitCode: report.ok ? 0 : 1, report, human: renderDrill(report) };
  },
};
