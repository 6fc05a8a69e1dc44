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
  return `${summary}\n\n${table(header, rows, new Set([3]))}${note}${renderDcpFiles(report)}`;
}

/** A DCP directory's files (one per rank and writer thread) and what keeps a load from finding every piece. */
function renderDcpFiles(report: InspectReport): string {
  if (report.kind !== "dcp") return "";
  const files = table(
    ["file", "bytes"],
    report.files.map((f) => [f.file, String(f.size)]),
    new Set([1]),
  );
  const problems = (report.problems ?? []).map((p) => `${p.code} ${p.file}: ${p.message}`);
  const verdict =
    problems.length === 0 ? "complete: every chunk's file is present and long enough" : problems.join("\n");
  return `\n\n${files}\n\n${verdict}`;
}

export const inspectCommand: CkptCommand<InspectArgs> = {
  command: "inspect <path>",
  exitCodes: { 1: "the file is damaged (the report names where)" },
  describe:
    "List the tensors of a checkpoint file or directory (safetensors, HF directory, torch.save, DCP: with its files and what is missing)",
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
    // A DCP directory a load cannot read whole is reported, and fails the command like `ckpt verify`.
    const ok = (report.problems ?? []).length === 0;
    return { exitCode: ok ? 0 : 1, report: { ok, ...report }, human: renderInspect(report, args.sha256) };
  },
};
