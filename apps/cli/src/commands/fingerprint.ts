import type { DirectoryFingerprint } from "@ckpt/diagnostics";
import { createProgress } from "../progress.js";
import { formatBytes } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface FingerprintArgs {
  dir: string;
  fast: boolean;
  files: boolean;
}

/** The result: the fingerprint alone (for `$(...)`), then with --files one row per file it covers. */
function renderFingerprint(f: DirectoryFingerprint, withFiles: boolean): string {
  const rows = f.files.map(
    (file) => `${file.sha256 ?? "-".repeat(64)}  ${String(file.size).padStart(12)}  ${file.path}`,
  );
  return [f.fingerprint, ...(withFiles ? rows : [])].join("\n");
}

/** What the fingerprint covers, for stderr. */
function describeFingerprint(f: DirectoryFingerprint): string {
  const lines = [
    `${f.schema}, ${f.mode}: ${f.files.length} files, ${formatBytes(f.size)}` +
      (f.mode === "fast" ? ` (${formatBytes(f.hashed_bytes)} hashed; weight files by path and size)` : ""),
  ];
  if (f.excluded.length > 0) lines.push(`left out (bookkeeping, not content): ${f.excluded.join(", ")}`);
  return lines.join("\n");
}

export const fingerprintCommand: CkptCommand<FingerprintArgs> = {
  command: "fingerprint <dir>",
  describe:
    "A stable identity of a checkpoint or Hugging Face directory (every file's sha256, or path+size with --fast)",
  builder: (yargs) =>
    yargs
      .positional("dir", {
        type: "string",
        demandOption: true,
        describe: "An iter_* checkpoint or artifact, a fetched stage, a Hugging Face model directory",
      })
      .option("fast", {
        type: "boolean",
        default: false,
        describe:
          "Identify weight files (.safetensors, .pt, .distcp, ...) by path and size; metadata is still hashed",
      })
      .option("files", {
        type: "boolean",
        default: false,
        describe: "Also list every file with its size and sha256",
      })
      .example(
        "ckpt fingerprint ./hf-model",
        "prints the ckpt.fingerprint.v1 digest alone on stdout (what it covers goes to stderr)",
      )
      .example(
        "ckpt fingerprint /lustre/bases/qwen-vl-8b --fast --json",
        "seal a plan on a large base without reading its weights; the JSON lists every file",
      ),
  async run(args, io) {
    const { fingerprintDirectory } = await import("@ckpt/diagnostics");
    const progress = createProgress(io, "hash", { files: true });
    let result: DirectoryFingerprint;
    try {
      result = await fingerprintDirectory(args.dir, {
        fast: args.fast,
        onProgress: (e) => {
          if (e.type === "file-done") progress.fileDone(e.path);
          else progress.update(e.doneBytes, e.totalBytes, e.path);
        },
      });
    } finally {
      progress.finish();
    }
    return {
      exitCode: 0,
      report: { ok: true, path: args.dir, ...result },
      result: renderFingerprint(result, args.files),
      human: describeFingerprint(result),
    };
  },
};
