import { resolve } from "node:path";
import type { FetchEvent } from "@ckpt/archive-reader";
import { isInside, type MaterializedMarker } from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import type { ConvertProgress } from "../convert/write.js";
import { HfConversionError } from "../errors.js";
import type { ExpertLayoutRule } from "../plan/rules.js";
import type { VerifyReport } from "../verify/verify.js";
import type { LoaderCheckRecord } from "./loader-check.js";
import type { MaterializeDecision, Recovery } from "./decide.js";

/** `--min-tensors` when not given: a real model has hundreds of tensors; a tiny export is a mistake. */
export const DEFAULT_MIN_TENSORS = 800;
/** `--lock-wait-seconds` when not given. */
export const DEFAULT_LOCK_WAIT_SECONDS = 120;

/** Where the model.pt comes from: a local artifact directory, or an archive read through `store`. */
export type MaterializeSource =
  | { readonly kind: "local"; readonly ckptDir: string }
  | { readonly kind: "archive"; readonly uri: string; readonly store: ObjectStore };

export interface MaterializeRequest {
  readonly source: MaterializeSource;
  readonly base: string;
  readonly out: string;
  /** Archive staging root (default `<out>.stage`). */
  readonly stageDir?: string;
  /** Keep what this run staged from the archive. */
  readonly keepStaged?: boolean;
  /** Exact output tensor count; 0 (default) = none. */
  readonly expectTensors?: number;
  /** Fewest output tensors (default {@link DEFAULT_MIN_TENSORS}). */
  readonly minTensors?: number;
  /** false skips tensor probing only (`--no-verify`). */
  readonly verify?: boolean;
  readonly force?: boolean;
  readonly unifiedChatTemplate?: boolean;
  /**
   * A Python interpreter with transformers: the staged build must load with it (AutoConfig, the
   * config's architecture class, AutoTokenizer, AutoProcessor when there is a processor config,
   * GenerationConfig when there is a generation config) before it is published.
   */
  readonly loaderCheck?: string;
  /** Finite, >= 0 (default {@link DEFAULT_LOCK_WAIT_SECONDS}). */
  readonly lockWaitSeconds?: number;
  /** Expert layout rules (default: the built-in ones). */
  readonly rules?: readonly ExpertLayoutRule[];
  readonly signal?: AbortSignal;
}

export interface MaterializeReport {
  /** `built`: converted now; `skipped`: an intact output of this request was there; `published`: a complete staged build was verified and swapped in. */
  readonly action: "built" | "skipped" | "published";
  readonly out: string;
  readonly marker: MaterializedMarker;
  /** Repairs of an interrupted earlier run, in the order done. */
  readonly recovered: readonly string[];
  /** Things worth knowing that changed nothing (kept leftovers, ignored base entries, dtype changes). */
  readonly notes: readonly string[];
  /** null for a skip, or a publish under --no-verify. */
  readonly verification: VerifyReport | null;
  /** The loader check this run ran (`--loader-check`), with its time; null when it ran none. */
  readonly loaderCheck: (LoaderCheckRecord & { readonly seconds: number }) | null;
  /** The archive staging this run fetched into, and what of it this run removed (null: nothing fetched). */
  readonly staging: { readonly dir: string; readonly removed: readonly string[] } | null;
}

export type MaterializeEvent =
  | {
      readonly type: "preflight";
      readonly base: string;
      readonly fingerprint: string;
      readonly tensors: number;
      readonly sidecars: number;
    }
  | { readonly type: "lock"; readonly waitedFor: string | undefined }
  | {
      readonly type: "decision";
      readonly action: MaterializeDecision["action"];
      readonly recover: readonly Recovery[];
    }
  | { readonly type: "fetch"; readonly event: FetchEvent }
  | ConvertProgress
  | { readonly type: "verify"; readonly probing: boolean }
  | { readonly type: "loader-check"; readonly python: string };

/** A request's options, checked and completed by {@link resolveMaterializeOptions}. */
export interface Options {
  readonly out: string;
  readonly staged: string;
  readonly previous: string;
  readonly stageRoot: string;
  readonly keepStaged: boolean;
  readonly expectTensors: number;
  readonly minTensors: number;
  readonly verify: boolean;
  readonly force: boolean;
  readonly unified: boolean;
  readonly loaderCheck: string | undefined;
  readonly lockWaitSeconds: number;
}

function badOption(message: string): HfConversionError {
  return new HfConversionError("MATERIALIZE_BAD_OPTION", message, { kind: "input" });
}

/** Checks and completes a request's options. Pure. */
export function resolveMaterializeOptions(request: MaterializeRequest): Options {
  const count = (name: string, value: number | undefined, fallback: number) => {
    const v = value ?? fallback;
    if (!Number.isSafeInteger(v) || v < 0) throw badOption(`--${name} ${v} is not a whole number >= 0.`);
    return v;
  };
  const wait = request.lockWaitSeconds ?? DEFAULT_LOCK_WAIT_SECONDS;
  if (typeof wait !== "number" || !Number.isFinite(wait) || wait < 0) {
    throw badOption(
      `--lock-wait-seconds ${wait} is not a finite number of seconds >= 0 (inf and nan are refused).`,
    );
  }
  if (request.source.kind === "local" && (request.stageDir !== undefined || request.keepStaged)) {
    throw badOption(
      "--stage-dir and --keep-staged apply to --artifact-uri only; a local artifact is read in place.",
    );
  }
  if (request.loaderCheck !== undefined && request.loaderCheck.trim() === "") {
    throw badOption("--loader-check needs a Python interpreter (a path or a command name).");
  }
  const out = resolve(request.out);
  const base = resolve(request.base);
  if (isInside(base, out) || isInside(out, base)) {
    throw badOption(`--out ${out} and --base ${base} overlap; the output must be a directory of its own.`);
  }
  if (request.source.kind === "local") {
    const dir = resolve(request.source.ckptDir);
    if (isInside(out, dir) || isInside(dir, out))
      throw badOption(`--out ${out} and --ckpt-dir ${dir} overlap.`);
  }
  return {
    out,
    staged: `${out}.tmp`,
    previous: `${out}.previous`,
    stageRoot: resolve(request.stageDir ?? `${out}.stage`),
    keepStaged: request.keepStaged ?? false,
    expectTensors: count("expect-tensors", request.expectTensors, 0),
    minTensors: count("min-tensors", request.minTensors, DEFAULT_MIN_TENSORS),
    verify: request.verify ?? true,
    force: request.force ?? false,
    unified: request.unifiedChatTemplate ?? false,
    loaderCheck: request.loaderCheck,
    lockWaitSeconds: wait,
  };
}
