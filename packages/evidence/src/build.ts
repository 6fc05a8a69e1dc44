// buildEvidence: the ckpt.evidence.v2 bundle of a run or one of its attempts, assembled from the
// answers the libraries already give (the manager's evidence and run status, retention's scan,
// verify, the volume's tier). It judges nothing itself and writes nothing (unless the storage probe
// is asked for); whatever a library raises becomes a problem of the closed set, never a throw, and
// every directory listing and the whole collection are bounded.
import { lstat, opendir, stat } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { describeVolume, probeStorage, type StorageProbeReport, storageVerdict } from "@ckpt/diagnostics";
import { messageOf } from "@ckpt/errors";
import { CHECKPOINT_ARTIFACTS_DIR, CHECKPOINTS_DIR, isRunTs, parseRunTs } from "@ckpt/manifest";
import {
  archivedTo,
  artifactLocality,
  collectEvidence,
  type EvidenceBundle,
  type RunStatusReport,
  readAttemptWindows,
  runStatus,
  WINDOWS_FILE,
} from "@ckpt/trainer-checkpoint-manager";
import { verifyPath } from "@ckpt/verify";
import { PROBLEMS, type ProblemCode, problemCodeOf } from "./problems.js";
import {
  EVIDENCE_SCHEMA,
  type Evidence,
  type EvidenceArtifact,
  type EvidenceAttempt,
  type EvidenceCheckpoint,
  type EvidenceProblem,
  type EvidenceStorage,
  type VerifyResult,
} from "./schema.js";

export interface BuildEvidenceOptions {
  /** Entries read from one directory before the rest is left out with `TREE_TOO_LARGE` (default 20,000). */
  readonly maxEntries?: number;
  /** The whole collection's bound; past it the bundle is returned with `TIMED_OUT` (default 30 s). */
  readonly timeoutMs?: number;
  /** Run `ckpt doctor volume`'s write/sync/rename/read-back probe on the run's volume (it writes a file there; default: classify the volume only). */
  readonly probeStorage?: boolean;
  /** Verify (as `ckpt verify` does) each attempt's resume checkpoint and newest artifact (`newest`), every one (`all`) or none (default). */
  readonly verify?: "none" | "newest" | "all";
  /** Cancels the collection: the libraries' scans and verifies stop, and the bundle so far is returned with `ABORTED`. */
  readonly signal?: AbortSignal;
}

const DEFAULT_MAX_ENTRIES = 20_000;
const DEFAULT_TIMEOUT_MS = 30_000;
/** A library's code at the head of a finding (`VERIFY_DIGEST_MISMATCH <path>: ...`). */
const LEADING_CODE = /^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+) /;

/** A problem of the closed set, with its definition's severity and remedy. Pure. */
export function problem(
  code: ProblemCode,
  subject: string,
  message: string,
  cause: string | null = null,
): EvidenceProblem {
  return { code, severity: PROBLEMS[code].severity, subject, message, cause, remedy: PROBLEMS[code].remedy };
}

/** A problem a library reported with its own code (`VERIFY_DIGEST_MISMATCH`, ...): mapped onto the closed set, the code kept as the cause. Pure. */
export function libraryProblem(code: string, subject: string, message: string): EvidenceProblem {
  return problem(problemCodeOf(code), subject, message, code);
}

/**
 * The bundle's storage entry of a volume (a `ckpt doctor volume` report, or the volume's
 * description when the probe did not run: `probed: false`) with the verdict on it. Pure.
 */
export function storageEntry(
  dir: string,
  volume: Pick<StorageProbeReport, "tier" | "filesystem" | "known" | "promise">,
  probed: boolean,
  verdict: { readonly ok: boolean; readonly reasons: readonly string[] },
): EvidenceStorage {
  return {
    dir,
    tier: volume.tier,
    filesystem: volume.filesystem.type,
    known: volume.known,
    promise: volume.promise,
    probed,
    ok: verdict.ok,
    reasons: [...verdict.reasons],
  };
}

/** A bundle's verdict: no problem of error severity (warnings and notes do not fail it). Pure. */
export function withoutErrors(problems: readonly EvidenceProblem[]): boolean {
  return problems.every((p) => p.severity !== "error");
}

/** The problem an error is: its library code (or errno) mapped onto the closed set. Pure. */
export function problemFromError(error: unknown, subject: string): EvidenceProblem {
  const code = (error as { code?: unknown } | null)?.code;
  const cause = typeof code === "string" ? code : null;
  return problem(
    cause === null ? "INTERNAL_FAILURE" : problemCodeOf(cause),
    subject,
    messageOf(error),
    cause,
  );
}

/** A problem the manager's evidence reported: a checkpoint finding keeps the verifier's code when it led the line. */
function fromManagerProblem(p: EvidenceBundle["problems"][number]): EvidenceProblem {
  const leading = p.code === "CHECKPOINT_INCOMPLETE" ? LEADING_CODE.exec(p.message)?.[1] : undefined;
  const cause = leading !== undefined && problemCodeOf(leading) !== "INTERNAL_FAILURE" ? leading : p.code;
  return problem(problemCodeOf(cause), p.subject, p.message, cause);
}

/** The collection stopped: its deadline passed (`timedOut`) or the caller cancelled it. */
class Stopped extends Error {
  constructor(readonly timedOut: boolean) {
    super(timedOut ? "timed out" : "aborted");
  }
}

/**
 * Runs the collection's steps against one deadline and the caller's signal. Both abort `signal`,
 * which the library calls take, so the work a step leaves behind stops too instead of running on.
 */
class Budget {
  readonly problems: EvidenceProblem[] = [];
  complete = true;
  readonly signal: AbortSignal;
  private readonly deadline: number;
  private readonly timeout = new AbortController();
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly subject: string,
    timeoutMs: number,
    readonly maxEntries: number,
    caller: AbortSignal | undefined,
  ) {
    this.deadline = performance.now() + timeoutMs;
    this.timer = setTimeout(() => this.timeout.abort(), timeoutMs);
    this.signal = caller === undefined ? this.timeout.signal : AbortSignal.any([caller, this.timeout.signal]);
  }

  /** The collection is over: its deadline no longer needs a timer. */
  dispose(): void {
    clearTimeout(this.timer);
  }

  private stopped(): Stopped {
    return new Stopped(this.timeout.signal.aborted);
  }

  /** The step's answer, or undefined when it failed (its problem recorded); throws Stopped past the deadline or on the caller's abort. */
  async step<T>(subject: string, work: () => Promise<T>): Promise<T | undefined> {
    if (performance.now() >= this.deadline) this.timeout.abort();
    if (this.signal.aborted) throw this.stopped();
    let onAbort: (() => void) | undefined;
    const stopped = new Promise<"stopped">((resolve) => {
      onAbort = () => resolve("stopped");
      this.signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      const outcome = await Promise.race([work().then((value) => ({ value })), stopped]);
      if (outcome === "stopped") throw this.stopped();
      return outcome.value;
    } catch (error) {
      if (error instanceof Stopped) throw error;
      this.problems.push(problemFromError(error, subject));
      return undefined;
    } finally {
      this.signal.removeEventListener("abort", onAbort!);
    }
  }

  /** The names in a directory, at most maxEntries (`TREE_TOO_LARGE` past it); undefined when unreadable. */
  async list(dir: string): Promise<string[] | undefined> {
    return this.step(dir, async () => {
      const names: string[] = [];
      for await (const entry of await opendir(dir)) {
        if (this.signal.aborted) break;
        if (names.length === this.maxEntries) {
          this.complete = false;
          this.problems.push(
            problem(
              "TREE_TOO_LARGE",
              dir,
              `${dir} holds more than ${this.maxEntries} entries; the rest is not examined`,
            ),
          );
          break;
        }
        names.push(entry.name);
      }
      return names.sort();
    });
  }
}

const exists = (path: string) =>
  stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );

/** The attempt directories a path names: itself (it holds a checkpoints root) or its RUN_TS children. */
async function attemptsOf(budget: Budget, path: string): Promise<{ runDir: string; attempts: string[] }> {
  const isAttempt = (dir: string) =>
    Promise.all([exists(join(dir, CHECKPOINTS_DIR)), exists(join(dir, CHECKPOINT_ARTIFACTS_DIR))]).then((a) =>
      a.some(Boolean),
    );
  if (await budget.step(path, () => isAttempt(path))) {
    return isRunTs(basename(path))
      ? { runDir: dirname(path), attempts: [path] }
      : { runDir: path, attempts: [path] }; // the legacy flat layout: the run is its own attempt
  }
  const names = (await budget.list(path)) ?? [];
  return { runDir: path, attempts: names.filter((n) => isRunTs(n)).map((n) => join(path, n)) };
}

function attemptOrigin(
  dir: string,
  siblings: readonly string[],
): Pick<EvidenceAttempt, "run_ts" | "minted" | "minted_at"> {
  const runTs = basename(dir);
  if (!isRunTs(runTs)) return { run_ts: "", minted: "legacy", minted_at: null };
  return {
    run_ts: runTs,
    minted: siblings.filter(isRunTs).sort()[0] === runTs ? "first" : "sibling",
    minted_at: parseRunTs(runTs)?.toISOString() ?? null,
  };
}

async function verifyResult(budget: Budget, dir: string): Promise<VerifyResult> {
  const at = new Date().toISOString();
  const report = await budget.step(dir, () => verifyPath(dir, { signal: budget.signal }));
  if (report === undefined) return null;
  for (const p of report.problems) budget.problems.push(libraryProblem(p.code, p.path, p.message));
  return { ok: report.ok, at, problems: report.problems.map((p) => p.code) };
}

/**
 * Why a checkpoint's `resume.resumable` is null, and where its layout came from instead; short, as
 * 10,000 checkpoints repeat it and agents' MCP clients read at most 10 MiB per answer.
 */
const NOT_PROBED = {
  pastPointer: "not probed: past the latest pointer (never committed); layout from its listing",
  behindComplete: "not probed: a newer complete checkpoint is the resume source; layout from its listing",
};

function checkpointOf(
  c: RunStatusReport["checkpoints"][number],
  bundle: EvidenceBundle,
): Omit<EvidenceCheckpoint, "last_verify"> {
  const newest =
    bundle.newestCheckpoint?.iterDir === c.dir || bundle.newestCheckpoint?.iterDir === `${c.dir}/`;
  return {
    iteration: c.iteration,
    dir: c.dir,
    depth: c.depth,
    format: c.format === "unknown" ? null : c.format,
    // Relative to `dir`: the absolute path again for each component would double the answer.
    components: c.components.map((x) => ({ ...x, path: relative(c.dir, x.path) })),
    bytes: c.bytes,
    files:
      newest && bundle.newestCheckpointFiles !== null
        ? bundle.newestCheckpointFiles.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 ?? null }))
        : null,
    manifest_sha256: c.manifestSha256,
    resume:
      c.complete === null
        ? {
            resumable: null,
            reason: c.pastPointer ? NOT_PROBED.pastPointer : NOT_PROBED.behindComplete,
            findings: [],
          }
        : c.complete
          ? { resumable: true, reason: "every component is present and matches its record", findings: [] }
          : {
              resumable: false,
              reason:
                c.problems.length === 1
                  ? c.problems[0]!
                  : `${c.problems[0]} (and ${c.problems.length - 1} more)`,
              findings: [...c.problems],
            },
    retention: {
      latest: c.latest,
      past_pointer: c.pastPointer,
      has_optimizer: c.hasOptimizer,
      upload: c.upload,
      validation: c.validation,
    },
  };
}

function artifactOf(a: EvidenceBundle["artifacts"][number]): Omit<EvidenceArtifact, "last_verify"> {
  return {
    iteration: a.iteration,
    dir: a.dir,
    components: [...(a.logicalComponents ?? [])],
    bytes: a.payloads.reduce((sum, p) => sum + p.size, 0),
    payloads: a.payloads.map((p) => ({ ...p })),
    resume: {
      resumable: false,
      reason: "an artifact holds part of a save; resume takes full checkpoints only",
      findings: [],
    },
    retention: { local: artifactLocality(a) },
    archive:
      a.receipt === null
        ? null
        : {
            receipt: a.receipt.path,
            destination: archivedTo(a) ?? "",
            files: a.receipt.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 ?? null })),
          },
  };
}

async function attemptEvidence(
  budget: Budget,
  dir: string,
  siblings: readonly string[],
  verify: NonNullable<BuildEvidenceOptions["verify"]>,
): Promise<EvidenceAttempt> {
  const log = await budget.step(join(dir, WINDOWS_FILE), () => readAttemptWindows(dir));
  const base = { dir, ...attemptOrigin(dir, siblings), windows: log?.windows.length ?? null };
  const unknown: EvidenceAttempt = {
    ...base,
    pointer: { state: "absent" },
    resume: { decision: "unknown", reason: "the attempt could not be read; see the problems" },
    checkpoints: [],
    artifacts: [],
  };
  // Count before the libraries scan: a root with more entries than the bound is not scanned at all.
  for (const root of [CHECKPOINTS_DIR, CHECKPOINT_ARTIFACTS_DIR]) {
    const full = join(dir, root);
    if ((await lstat(full).catch(() => undefined)) === undefined) continue;
    const before = budget.problems.length;
    const names = await budget.list(full);
    if (names === undefined || budget.problems.length > before) return unknown;
  }
  const bundle = await budget.step(dir, () => collectEvidence(dir, { signal: budget.signal }));
  if (bundle === undefined) return unknown;
  budget.problems.push(...bundle.problems.map(fromManagerProblem));
  const status = await budget.step(dir, () => runStatus(dir, { evidence: bundle, signal: budget.signal }));
  if (status === undefined) return unknown;
  const checkpoints: EvidenceCheckpoint[] = [];
  for (const c of status.checkpoints) {
    const isResumeSource =
      status.resume.decision === "checkpoint" && status.resume.iterDir.replace(/\/$/, "") === c.dir;
    const wanted = verify === "all" || (verify === "newest" && isResumeSource);
    checkpoints.push({
      ...checkpointOf(c, bundle),
      last_verify: wanted ? await verifyResult(budget, c.dir) : null,
    });
  }
  const artifacts: EvidenceArtifact[] = [];
  for (const [i, a] of bundle.artifacts.entries()) {
    const wanted = verify === "all" || (verify === "newest" && i === bundle.artifacts.length - 1);
    const item = artifactOf(a);
    if (item.archive === null)
      budget.problems.push(
        problem("NOT_ARCHIVED", a.dir, `artifact iteration ${a.iteration} has no archive receipt`, null),
      );
    artifacts.push({ ...item, last_verify: wanted ? await verifyResult(budget, a.dir) : null });
  }
  const r = status.resume;
  return {
    ...base,
    pointer: status.pointer,
    resume:
      r.decision === "checkpoint"
        ? { decision: "checkpoint", iteration: r.iteration, dir: r.iterDir, reason: r.reason }
        : r,
    checkpoints,
    artifacts,
  };
}

async function storageEvidence(budget: Budget, dir: string, probe: boolean): Promise<EvidenceStorage | null> {
  if (probe) {
    const report = await budget.step(dir, () => probeStorage(dir));
    return report === undefined ? null : storageEntry(dir, report, true, storageVerdict(report));
  }
  const volume = await budget.step(dir, () => describeVolume(dir));
  if (volume === undefined) return null;
  return storageEntry(dir, volume, false, storageVerdict({ ...volume, probeOk: true, steps: [] }));
}

/**
 * The ckpt.evidence.v2 bundle of `path`: a run directory (`<root>/<project>/<group>/<name>`, every
 * RUN_TS attempt under it) or one attempt (`<name>/<RUN_TS>`, or a legacy `<name>` holding
 * `checkpoints/`). Never throws for what it finds: a missing path, an unreadable directory, a
 * symlink loop, an invalid record or a tree past the bounds is a problem of the closed set
 * (`PROBLEMS`), and `complete: false` says a bound cut it short.
 */
export async function buildEvidence(path: string, options: BuildEvidenceOptions = {}): Promise<Evidence> {
  const budget = new Budget(
    path,
    options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    options.maxEntries ?? DEFAULT_MAX_ENTRIES,
    options.signal,
  );
  let runDir = path;
  const attempts: EvidenceAttempt[] = [];
  let storage: EvidenceStorage | null = null;
  try {
    const info = await budget.step(path, () => stat(path));
    if (info !== undefined && !info.isDirectory())
      budget.problems.push(problem("NOT_A_CHECKPOINT", path, `${path} is not a directory`, null));
    if (info?.isDirectory()) {
      const found = await attemptsOf(budget, path);
      runDir = found.runDir;
      if (found.attempts.length === 0)
        budget.problems.push(
          problem(
            "NOT_A_CHECKPOINT",
            path,
            `${path} holds no run attempt (no checkpoints/ or checkpoint_artifacts/, no RUN_TS directory)`,
          ),
        );
      const siblings =
        found.attempts.length === 1 && found.runDir !== path
          ? ((await budget.list(runDir)) ?? [])
          : found.attempts.map((a) => basename(a));
      for (const dir of found.attempts)
        attempts.push(await attemptEvidence(budget, dir, siblings, options.verify ?? "none"));
      storage = await storageEvidence(budget, runDir, options.probeStorage === true);
      if (storage !== null && !storage.ok)
        budget.problems.push(problem("UNSAFE_STORAGE", storage.dir, storage.reasons.join("; ")));
    }
  } catch (error) {
    budget.complete = false;
    budget.problems.push(
      !(error instanceof Stopped)
        ? problemFromError(error, path)
        : error.timedOut
          ? problem(
              "TIMED_OUT",
              path,
              `collecting the evidence of ${path} took longer than ${options.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms`,
            )
          : problem("ABORTED", path, `collecting the evidence of ${path} was cancelled by its caller`),
    );
  } finally {
    budget.dispose();
  }
  const newest = attempts.at(-1)?.resume;
  return {
    schema: EVIDENCE_SCHEMA,
    root: path,
    run: { dir: runDir, name: basename(runDir) },
    status:
      newest === undefined ? "unknown" : newest.decision === "checkpoint" ? "resumable" : newest.decision,
    attempts,
    storage,
    problems: budget.problems,
    complete: budget.complete,
  };
}
