import { lstat, open } from "node:fs/promises";
import { basename, dirname, extname, join } from "node:path";
import type { LocalProblem, LocalVerifyReport } from "@ckpt/archive-reader";
import type { Destination } from "@ckpt/manifest";
import { CliInputError } from "../errors.js";
import type { CliIo } from "../io.js";
import { createProgress } from "../progress.js";
import { formatBytes, paint, table } from "../render.js";
import type { CkptCommand } from "./registry.js";

/** What `ckpt verify` can judge. */
export const VERIFY_KINDS = ["checkpoint", "artifact", "stage", "dcp", "hf", "torch", "safetensors"] as const;
export type VerifyKind = (typeof VERIFY_KINDS)[number];

interface VerifyArgs {
  path: string;
  kind?: VerifyKind;
  finite: boolean;
  deep: boolean;
}

/** One problem as the report lists it: a code from the closed set, the file, what is wrong. */
export interface VerifyProblem {
  readonly code: string;
  readonly path: string;
  readonly message: string;
  readonly record?: string;
  readonly cause?: string;
  readonly tensor?: string;
}

/** The `--json` report (schema-versioned; evidence bundles embed it). */
export interface VerifyReport {
  readonly schema: "ckpt.verify-report.v1";
  readonly ok: boolean;
  readonly kind: VerifyKind;
  readonly path: string;
  readonly iteration: number | null;
  readonly checks: { readonly finite: boolean; readonly deep: boolean };
  readonly problems: readonly VerifyProblem[];
  readonly released: readonly string[];
  readonly sizeOnly: readonly string[];
  readonly notes: readonly string[];
  readonly hashed: { readonly files: number; readonly bytes: number };
  /** The archive a receipt binds (check it with `ckpt artifact verify`). */
  readonly archive: Destination | null;
  /** Tensors listed (files, HF and DCP directories), when known. */
  readonly tensors: number | null;
}

/**
 * The closed set of problem codes a verify report can hold: the local-verification codes of
 * @ckpt/archive-reader, the tensor-level codes of @ckpt/tensors and the Hugging Face directory
 * codes of @ckpt/hf-conversion. Loaded lazily, like every library.
 */
export async function verifyProblemCodes(): Promise<string[]> {
  const [{ LOCAL_PROBLEM_CODES }, { TENSOR_PROBLEM_CODES }, { HF_DIRECTORY_PROBLEM_CODES }] =
    await Promise.all([
      import("@ckpt/archive-reader"),
      import("@ckpt/tensors"),
      import("@ckpt/hf-conversion"),
    ]);
  return [...LOCAL_PROBLEM_CODES, ...TENSOR_PROBLEM_CODES, ...HF_DIRECTORY_PROBLEM_CODES];
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

async function startsLikeTorch(path: string): Promise<boolean> {
  const handle = await open(path, "r");
  try {
    const head = new Uint8Array(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    return (
      (bytesRead === 4 && head[0] === 0x50 && head[1] === 0x4b) || (head[0] === 0x80 && head[1] === 0x02)
    );
  } finally {
    await handle.close();
  }
}

/**
 * What a path is, from its name and the records in it (first match wins): a file by extension or
 * signature; a directory with `.staged.json` (stage), the artifact manifest or an `iter_*` under
 * `checkpoint_artifacts/` (artifact), `_SUCCESS` / `.posttrain-manifest.json` / `model.pt` /
 * `trainer.pt` / an `iter_*` name (full checkpoint), `.metadata` (DCP), `model.safetensors[.index.json]` (HF).
 */
export async function detectVerifyKind(path: string): Promise<VerifyKind> {
  let info: Awaited<ReturnType<typeof lstat>>;
  try {
    info = await lstat(path);
  } catch {
    throw new CliInputError(
      "VERIFY_PATH_MISSING",
      `verify ${path}: no such file or directory. Check the path.`,
    );
  }
  if (info.isFile()) {
    const ext = extname(path);
    if (ext === ".safetensors") return "safetensors";
    if ([".pt", ".pth", ".bin"].includes(ext) || (await startsLikeTorch(path))) return "torch";
  } else if (info.isDirectory()) {
    const has = (name: string) => exists(join(path, name));
    const iterName = /^iter_\d+$/.test(basename(path));
    if (await has(".staged.json")) return "stage";
    if (
      (await has(".posttrain-checkpoint-artifact.json")) ||
      (iterName && basename(dirname(path)) === "checkpoint_artifacts")
    )
      return "artifact";
    if ((await has("_SUCCESS")) || (await has(".posttrain-manifest.json"))) return "checkpoint";
    if ((await has("model.pt")) || (await has("trainer.pt"))) return "checkpoint";
    if (await has(".metadata")) return "dcp";
    if ((await has("model.safetensors.index.json")) || (await has("model.safetensors"))) return "hf";
    if (iterName) return "checkpoint";
  }
  throw new CliInputError(
    "VERIFY_UNKNOWN_KIND",
    `verify ${path}: not a checkpoint ckpt can judge (a .pt/.safetensors file, an iter_* checkpoint or artifact, ` +
      "a fetched stage, a DCP directory with .metadata, a Hugging Face directory). Pass --kind to say what it is.",
  );
}

function fromLocal(
  kind: VerifyKind,
  report: LocalVerifyReport,
  checks: VerifyReport["checks"],
): VerifyReport {
  return {
    schema: "ckpt.verify-report.v1",
    ok: report.ok,
    kind,
    path: report.path,
    iteration: report.iteration ?? null,
    checks,
    problems: report.problems.map(problemOf),
    released: report.released,
    sizeOnly: report.sizeOnly,
    notes: report.notes,
    hashed: { files: report.hashedFiles, bytes: report.hashedBytes },
    archive: report.archive ?? null,
    tensors: null,
  };
}

function problemOf(p: LocalProblem | VerifyProblem): VerifyProblem {
  const { code, path, message, record, cause, tensor } = p;
  return {
    code,
    path,
    message,
    ...(record === undefined ? {} : { record }),
    ...(cause === undefined ? {} : { cause }),
    ...(tensor === undefined ? {} : { tensor }),
  };
}

function emptyReport(kind: VerifyKind, path: string, checks: VerifyReport["checks"]): VerifyReport {
  return {
    schema: "ckpt.verify-report.v1",
    ok: true,
    kind,
    path,
    iteration: null,
    checks,
    problems: [],
    released: [],
    sizeOnly: [],
    notes: [],
    hashed: { files: 0, bytes: 0 },
    archive: null,
    tensors: null,
  };
}

/** Runs the library judgement for `kind`; the libraries decide, this only composes. */
async function judge(
  kind: VerifyKind,
  path: string,
  checks: VerifyReport["checks"],
  onProgress: (e: { path: string; doneBytes: number; totalBytes: number }) => void,
): Promise<VerifyReport> {
  const options = { finite: checks.finite, crc: checks.deep, onProgress };
  switch (kind) {
    case "artifact":
    case "stage":
    case "checkpoint": {
      const reader = await import("@ckpt/archive-reader");
      const run =
        kind === "artifact"
          ? reader.verifyArtifactDir
          : kind === "stage"
            ? reader.verifyStagedDir
            : reader.verifyCheckpointDir;
      return fromLocal(kind, await run(path, options), checks);
    }
    case "torch":
    case "safetensors": {
      const { verifyTensorFile } = await import("@ckpt/tensors");
      const file = await verifyTensorFile(path, { ...options, format: kind });
      const problems = file.problems.map(problemOf);
      return {
        ...emptyReport(kind, path, checks),
        ok: problems.length === 0,
        problems,
        notes: file.notes,
        tensors: file.tensors ?? null,
      };
    }
    case "dcp": {
      const { verifyDcpDirectory } = await import("@ckpt/tensors");
      const dcp = await verifyDcpDirectory(path);
      const notes = checks.finite
        ? ["DCP shards are checked for presence and length; their tensors are not scanned for NaN/Inf"]
        : [];
      const problems = dcp.problems.map(problemOf);
      return {
        ...emptyReport(kind, path, checks),
        ok: problems.length === 0,
        problems,
        notes,
        tensors: dcp.tensors,
      };
    }
    case "hf": {
      const [{ checkHfDirectory }, { verifyMaterializedDir }] = await Promise.all([
        import("@ckpt/hf-conversion"),
        import("@ckpt/archive-reader"),
      ]);
      const structure = await checkHfDirectory(path);
      const recorded = await verifyMaterializedDir(path, options);
      const local = fromLocal(kind, recorded, checks);
      const problems = [
        ...structure.problems.map((p) => ({ code: p.code, path: p.file, message: p.message })),
        ...local.problems,
      ];
      return { ...local, ok: problems.length === 0, problems, tensors: structure.tensorCount };
    }
  }
}

/** A verdict line, then the problems as a table, then what was released and the notes. */
export function renderVerifyReport(report: VerifyReport, io: Pick<CliIo, "color">): string {
  const what = `${report.kind}${report.iteration === null ? "" : ` (iteration ${report.iteration})`}`;
  const hashed =
    report.hashed.files > 0
      ? `, ${report.hashed.files} files hashed (${formatBytes(report.hashed.bytes)})`
      : "";
  const lines: string[] = [];
  if (report.ok) {
    lines.push(`${report.path}: ${what} ${paint(io, "green", "sound")}${hashed}`);
  } else {
    const n = report.problems.length;
    lines.push(`${report.path}: ${what} ${paint(io, "red", `${n} PROBLEM${n === 1 ? "" : "S"}`)}${hashed}`);
    lines.push(
      "",
      table(
        ["code", "path", "detail"],
        report.problems.map((p) => [p.code, p.path, p.message]),
      ),
    );
  }
  if (report.released.length > 0) {
    const where = report.archive
      ? ` (archived in ${report.archive.scheme}://${report.archive.bucket}/${report.archive.prefix})`
      : "";
    lines.push("", `released after archiving${where}: ${report.released.join(", ")}`);
    lines.push("check the archive itself with `ckpt artifact verify --artifact-dir <dir>`");
  }
  if (report.sizeOnly.length > 0)
    lines.push("", `no digest recorded, size checked: ${report.sizeOnly.join(", ")}`);
  for (const note of report.notes) lines.push(`note: ${note}`);
  return lines.join("\n");
}

export const verifyCommand: CkptCommand<VerifyArgs> = {
  command: "verify <path>",
  describe:
    "Judge a checkpoint, artifact, fetched stage, DCP or Hugging Face directory, or a .pt/.safetensors file, against its own records",
  builder: (yargs) =>
    yargs
      .positional("path", {
        type: "string",
        demandOption: true,
        describe: "What to judge; its kind is detected from its name and the records in it",
      })
      .option("kind", {
        choices: VERIFY_KINDS,
        describe: "Judge the path as this kind instead of detecting it",
      })
      .option("finite", {
        type: "boolean",
        default: false,
        describe: "Also read every floating tensor of .pt/.safetensors files and report NaN/Inf (streaming)",
      })
      .option("deep", {
        type: "boolean",
        default: false,
        describe: "Also read every byte of .pt files and check each zip member's CRC-32",
      })
      .example(
        "ckpt verify run/20260901120000/checkpoint_artifacts/iter_000000300",
        "every payload present with the size and sha256 its manifest records; exit 0 sound, 1 problems, 2 unusable input",
      )
      .example("ckpt verify model.safetensors --finite --json", "NaN/Inf scan of one file, as a JSON report")
      .example(
        "ckpt verify run/20260901120000/checkpoints/iter_000000100 --deep",
        "a full checkpoint: components present, .pt files intact (CRC-32), DCP shards long enough",
      ),
  async run(args, io) {
    const kind = args.kind ?? (await detectVerifyKind(args.path));
    const checks = { finite: args.finite, deep: args.deep };
    const progress = createProgress(io, "verify");
    let report: VerifyReport;
    try {
      report = await judge(kind, args.path, checks, (e) =>
        progress.update(e.doneBytes, e.totalBytes, e.path),
      );
    } finally {
      progress.finish();
    }
    return { exitCode: report.ok ? 0 : 1, report, human: renderVerifyReport(report, io) };
  },
};
