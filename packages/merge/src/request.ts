import { basename, dirname, isAbsolute, relative, resolve } from "node:path";
import { MAX_ABS_LAM, MAX_MERGE_EXPERTS, parseIterDir } from "@ckpt/manifest";
import { MergeError } from "./errors.js";

/** Written into `.merge-complete.json` and the native manifest's `producer`; bump it when output bytes change. */
export const MERGE_TOOL_VERSION = "ckpt-merge/1";
/** The one payload of a merged artifact. */
export const MERGE_MODEL_FILE = "model.pt";
/** Where diagnostics go when `--diag` is not given: inside the artifact, so they are archived with it. */
export const DEFAULT_DIAGNOSTICS_FILE = "merge-diagnostics.json";

export const MERGE_MODES = ["avg", "tv"] as const;
export type MergeMode = (typeof MERGE_MODES)[number];

/** What a caller asks for, as the CLI takes it. Paths may be relative to `cwd`. */
export interface MergeOptions {
  readonly mode: string;
  /** Expert files in order (torch.save `{"net": state_dict}` or safetensors); the order is part of the identity. */
  readonly experts: readonly string[];
  /** Hugging Face base directory: required for `tv`, optional for `avg` (then used for diagnostics only). */
  readonly base?: string | undefined;
  /** Task-vector scale, `tv` only (default 1). */
  readonly lam?: number | undefined;
  /** `<...>/iter_<n>/model.pt`. */
  readonly out: string;
  /** When given, must equal the iteration the output directory names. */
  readonly iteration?: number | undefined;
  /** Diagnostics file; default `merge-diagnostics.json` inside the artifact directory. */
  readonly diag?: string | undefined;
  /** Replace a completed output of another request or tool version, and rebuild an identical one. */
  readonly force?: boolean | undefined;
}

/** Where the diagnostics land: inside the artifact (archived with it) or elsewhere (never archived). */
export type DiagnosticsTarget =
  | { readonly location: "artifact"; readonly path: string }
  | { readonly location: "external"; readonly path: string };

/** A validated request: absolute paths, the iteration, defaults applied. */
export interface ResolvedMergeRequest {
  readonly mode: MergeMode;
  readonly experts: readonly string[];
  readonly base: string | null;
  readonly lam: number | null;
  /** Absolute path of `model.pt`. */
  readonly out: string;
  /** The artifact directory `<...>/iter_<n>`. */
  readonly iterDir: string;
  readonly iteration: number;
  readonly diagnostics: DiagnosticsTarget;
  readonly force: boolean;
}

function bad(message: string, file?: string): MergeError {
  return new MergeError("MERGE_BAD_REQUEST", message, { kind: "input", file });
}

/** Top-level names an artifact directory reserves for payloads and records: diagnostics may not take them. */
function isReservedArtifactName(name: string): boolean {
  return name.startsWith(".") || name.endsWith(".pt") || name === MERGE_MODEL_FILE;
}

function resolveDiagnostics(diag: string | undefined, iterDir: string, cwd: string): DiagnosticsTarget {
  if (diag === undefined) return { location: "artifact", path: DEFAULT_DIAGNOSTICS_FILE };
  if (diag.trim() === "") {
    throw new MergeError("MERGE_BAD_DIAG_PATH", "merge: --diag is empty. Name a file, or leave it out.", {
      kind: "input",
    });
  }
  const absolute = resolve(cwd, diag);
  const inside = relative(iterDir, absolute);
  if (inside === "" || (!inside.startsWith("..") && !isAbsolute(inside))) {
    if (inside === "" || inside.includes("/") || isReservedArtifactName(inside)) {
      throw new MergeError(
        "MERGE_BAD_DIAG_PATH",
        `merge: --diag ${absolute} is inside the artifact directory ${iterDir} but is not a plain file name there ` +
          "(no subdirectory, no leading dot, not a .pt component). Use e.g. merge-diagnostics.json, or a path outside the artifact.",
        { kind: "input", file: absolute },
      );
    }
    return { location: "artifact", path: inside };
  }
  return { location: "external", path: absolute };
}

/**
 * Validates a merge request and applies the defaults; pure (paths resolve against `cwd`).
 * `--out` must be `<...>/iter_<n>/model.pt` and an explicit iteration must agree with `<n>`.
 */
export function resolveMergeRequest(options: MergeOptions, cwd: string): ResolvedMergeRequest {
  const mode = options.mode;
  if (!(MERGE_MODES as readonly string[]).includes(mode)) {
    throw bad(
      `merge: mode ${JSON.stringify(mode)} is not one of ${MERGE_MODES.join(", ")}. Pass --mode avg or --mode tv.`,
    );
  }
  if (options.experts.length === 0)
    throw bad("merge: no experts given. Pass --experts a/model.pt,b/model.pt.");
  if (options.experts.length > MAX_MERGE_EXPERTS) {
    throw bad(
      `merge: ${options.experts.length} experts; at most ${MAX_MERGE_EXPERTS} can be merged at once.`,
    );
  }
  const experts = options.experts.map((path, i) => {
    if (path.trim() === "")
      throw bad(`merge: expert ${i + 1} of --experts is an empty path (a stray comma?).`);
    return resolve(cwd, path);
  });
  if (mode === "tv" && (options.base === undefined || options.base.trim() === "")) {
    throw bad("merge: --mode tv adds task vectors onto a base. Pass --base <hf-dir>.");
  }
  if (mode === "avg" && options.lam !== undefined) {
    throw bad("merge: --lam applies to --mode tv only (in an average the base cancels). Leave it out.");
  }
  const lam = mode === "tv" ? (options.lam ?? 1) : null;
  if (lam !== null && !(Number.isFinite(lam) && Math.abs(lam) <= MAX_ABS_LAM)) {
    throw bad(`merge: --lam ${lam} is not a finite number within ±${MAX_ABS_LAM}.`);
  }
  const out = resolve(cwd, options.out);
  const iterDir = dirname(out);
  const iteration = parseIterDir(basename(iterDir));
  if (basename(out) !== MERGE_MODEL_FILE || iteration === undefined) {
    throw new MergeError(
      "MERGE_BAD_OUT_PATH",
      `merge: --out ${out} is not <...>/iter_<n>/${MERGE_MODEL_FILE}. Name the model file inside an iteration directory, e.g. run/checkpoint_artifacts/iter_000000300/${MERGE_MODEL_FILE}.`,
      { kind: "input", file: out },
    );
  }
  if (options.iteration !== undefined && options.iteration !== iteration) {
    throw new MergeError(
      "MERGE_ITERATION_MISMATCH",
      `merge: --iteration ${options.iteration} disagrees with the output directory ${basename(iterDir)} (iteration ${iteration}). Fix one of them.`,
      { kind: "input", file: iterDir },
    );
  }
  return {
    mode: mode as MergeMode,
    experts,
    base: options.base === undefined ? null : resolve(cwd, options.base),
    lam,
    out,
    iterDir,
    iteration,
    diagnostics: resolveDiagnostics(options.diag, iterDir, cwd),
    force: options.force === true,
  };
}
