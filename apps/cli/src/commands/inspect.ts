import type { InspectReport } from "@ckpt/tensors";
import { createProgress } from "../progress.js";
import { formatBytes, table } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface InspectArgs {
  path: string;
  sha256: boolean;
}

/** The human rendering of an inspect report: a summary line, then one aligned row per tensor. */
function renderInspect(report: InspectReport, withHashes: boolean): string {
  const total = report.tensors.reduce((a, t) => a + t.bytes, 0);
  const header = ["name", "dtype", "shape", "bytes", ...(withHashes ? ["sha256"] : [])];
  const rows = report.tensors.map((t) => [
    t.name,
    t.dtype,
    `[${t.shape.join(", ")}]`,
    String(t.bytes),
    ...(withHashes ? [t.sha256 ?? "-"] : []),
  ]);
  const files = report.files.length === 1 ? "1 file" : `${report.files.length} files`;
  const summary = `${report.path}: ${report.kind}, ${files}, ${report.tensors.length} tensors, ${formatBytes(total)}`;
  const note =
    withHashes && report.kind === "dcp"
      ? "\nDCP tensors are stored in chunks across files and have no per-tensor hash."
      : "";
  return `${summary}\n\n${table(header, rows, new Set([3]))}${note}`;
}

export const inspectCommand: CkptCommand<InspectArgs> = {
  command: "inspect <path>",
  describe: "List the tensors of a checkpoint file or directory (safetensors, HF directory, torch.save, DCP)",
  builder: (yargs) =>
    yargs
      .positional("path", {
        type: "string",
        demandOption: true,
        describe:
          "A .safetensors file, a torch.save file, a Hugging Face weights directory or a DCP directory",
      })
      .option("sha256", {
        type: "boolean",
        default: false,
        describe: "Also hash every tensor's bytes (reads all data)",
      })
      .example("ckpt inspect model.safetensors", "name, dtype, shape and bytes of every tensor")
      .example(
        "ckpt inspect ./hf-model --sha256 --json",
        "the same for a sharded directory, with hashes, as JSON",
      ),
  async run(args, io) {
    const { inspectPath } = await import("@ckpt/tensors");
    const progress = createProgress(io, "hash");
    let report: InspectReport;
    try {
      report = await inspectPath(args.path, {
        sha256: args.sha256,
        onProgress: (e) => progress.update(e.doneBytes, e.totalBytes, e.path),
      });
    } finally {
      progress.finish();
    }
    return { exitCode: 0, report: { ok: true, ...report }, human: renderInspect(report, args.sha256) };
  },
};
