// `ckpt run status`'s report: a run attempt at a glance, assembled from the evidence bundle and
// the resume probe of the resume candidates (components on disk now, sizes, pointer, receipts,
// pending validation, and what resume=auto would pick). Every other checkpoint's format,
// components and sizes come from the listing retention's scan already made, and a stat of each
// component. Read-only; rendering is the caller's.
import { lstat, type Stats } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { mapPool } from "@ckpt/manifest";
import { throwIfAborted } from "./errors.js";
import { type ArtifactEvidence, collectEvidence, type EvidenceBundle } from "./evidence.js";
import type { ComponentTargets } from "./layout.js";
import { type ProbedCheckpoint, probeFindings } from "./resume/decide.js";
import { componentsListed, probeLocalCheckpoint } from "./resume/local.js";

export interface ComponentStatus {
  readonly name: string;
  readonly path: string;
  readonly kind: "file" | "directory";
  /** On disk now (retention may have released it since the checkpoint was described). */
  readonly present: boolean;
  readonly bytes: number;
}

/** One `checkpoints/iter_*` as the manager's resume probe and retention's scan see it. */
export interface CheckpointStatus {
  readonly iteration: number;
  readonly dir: string;
  /** `latest_checkpoint.txt` names it. */
  readonly latest: boolean;
  /** Beyond the iteration the pointer names (or no pointer): a save that never committed. */
  readonly pastPointer: boolean;
  /**
   * The probe found nothing missing or wrong; null when it was not probed: past the pointer (never
   * committed) or behind the newest complete checkpoint (see `resumeCandidates`).
   */
  readonly complete: boolean | null;
  readonly problems: readonly string[];
  /**
   * How format, components and sizes were read: `probed` (its records, as the resume probe reads
   * them) or `listed` (its directory listing and a stat of each component: no record read).
   */
  readonly depth: "probed" | "listed";
  /** `unknown` when neither its records nor its listing show one. */
  readonly format: string;
  readonly components: readonly ComponentStatus[];
  readonly bytes: number;
  readonly hasOptimizer: boolean;
  readonly upload: string;
  readonly validation: string | null;
  readonly manifestSha256: string | null;
}

export interface ArtifactStatus {
  readonly iteration: number;
  readonly dir: string;
  readonly components: readonly string[];
  readonly bytes: number;
  /** Payload on local disk: all, some, or none (released after a verified archive). */
  readonly local: "yes" | "partly" | "released";
  /** Where its `.uploaded` receipt says it is archived. */
  readonly archivedTo: string | null;
}

export interface RunStatusReport {
  readonly ok: boolean;
  readonly attemptDir: string;
  readonly pointer: EvidenceBundle["latest"];
  /** What `resume=auto` would do now, and why (the manager's decision or its refusal). */
  readonly resume:
    | {
        readonly decision: "checkpoint";
        readonly iteration: number | null;
        readonly iterDir: string;
        readonly reason: string;
      }
    | { readonly decision: "fresh"; readonly reason: string }
    | { readonly decision: "refused"; readonly code: string; readonly reason: string };
  readonly checkpoints: readonly CheckpointStatus[];
  readonly artifacts: readonly ArtifactStatus[];
  /** Full checkpoints whose validation transaction is open. */
  readonly pendingValidation: ReadonlyArray<{ readonly iteration: number; readonly state: string }>;
  readonly problems: EvidenceBundle["problems"];
}

export interface RunStatusOptions {
  /** The attempt's evidence when the caller collected it already (it is not collected twice). */
  readonly evidence?: EvidenceBundle;
  /** Cancels the report (`MANAGER_ABORTED`): the collection and the probes of resume candidates. */
  readonly signal?: AbortSignal;
}

/**
 * The path's lstat, undefined when it cannot be read. Through the callback API: it costs half the
 * CPU of fs/promises' per call, and a status of 10,000 checkpoints makes 30,000 of them.
 */
function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  return new Promise((resolve) => lstat(path, (error, info) => resolve(error === null ? info : undefined)));
}

/** Bytes of the regular files at a path (a file, or every file under a directory); undefined when absent. */
async function pathBytes(path: string): Promise<number | undefined> {
  const info = await lstatOrUndefined(path);
  if (info === undefined) return undefined;
  if (!info.isDirectory()) return info.isFile() ? info.size : 0;
  let total = 0;
  for (const name of await readdir(path)) total += (await pathBytes(join(path, name))) ?? 0;
  return total;
}

/** Checkpoints measured at once: enough to keep the filesystem's thread pool busy (as retention's scan). */
const MEASURE_CONCURRENCY = 32;

/** Each component's path, kind and bytes on disk now (a directory target ends in `/`). */
async function measureComponents(targets: ComponentTargets): Promise<ComponentStatus[]> {
  return Promise.all(
    Object.entries(targets).map(async ([name, target]) => {
      const directory = target.endsWith("/");
      const path = directory ? target.slice(0, -1) : target;
      const bytes = await pathBytes(path);
      return {
        name,
        path,
        kind: directory ? ("directory" as const) : ("file" as const),
        present: bytes !== undefined,
        bytes: bytes ?? 0,
      };
    }),
  );
}

const totalBytes = (components: readonly ComponentStatus[]) =>
  components.reduce((sum, c) => sum + c.bytes, 0);

/** Whether an artifact's payload is on local disk: all of it, some, or none (released after a verified archive). Pure. */
export function artifactLocality(a: Pick<ArtifactEvidence, "payloads">): ArtifactStatus["local"] {
  return a.payloads.every((p) => p.local) ? "yes" : a.payloads.some((p) => p.local) ? "partly" : "released";
}

/** The archive URI an artifact's `.uploaded` receipt names, or null without a receipt. Pure. */
export function archivedTo(a: Pick<ArtifactEvidence, "receipt">): string | null {
  if (a.receipt === null) return null;
  const { scheme, bucket, prefix } = a.receipt.destination;
  return `${scheme}://${bucket}/${prefix}`;
}

function resumeOf(bundle: EvidenceBundle): RunStatusReport["resume"] {
  const r = bundle.resume;
  if (r.kind === "checkpoint") {
    return { decision: "checkpoint", iteration: r.iteration ?? null, iterDir: r.iterDir, reason: r.reason };
  }
  if (r.kind === "fresh") return { decision: "fresh", reason: r.reason };
  return { decision: "refused", code: r.code, reason: r.message };
}

/**
 * The checkpoints worth probing, in the order to probe them: the committed ones (at or behind the
 * iteration the pointer names; none without a pointer), newest first. The caller stops at the first
 * complete one, so a root full of never-committed or long-superseded directories costs one probe. Pure.
 */
function resumeCandidates<T extends { readonly iteration: number }>(
  checkpoints: readonly T[],
  pointed: number | undefined,
): T[] {
  if (pointed === undefined) return [];
  return checkpoints.filter((c) => c.iteration <= pointed).sort((a, b) => b.iteration - a.iteration);
}

/**
 * Assembles the status from the manager's evidence bundle and the probes of the resume candidates,
 * newest first up to the first complete one (the pointer's checkpoint, probed once by the
 * evidence). Every other checkpoint is unprobed (`complete: null`): its format and components are
 * what retention's listing of it shows, its sizes a stat of each (`depth: "listed"`). Read-only.
 */
export async function runStatus(
  attemptDir: string,
  options: RunStatusOptions = {},
): Promise<RunStatusReport> {
  const { signal } = options;
  const bundle =
    options.evidence ?? (await collectEvidence(attemptDir, signal === undefined ? {} : { signal }));
  const pointed = bundle.latest.state === "present" ? bundle.latest.iteration : undefined;
  const probes = new Map<string, ProbedCheckpoint>();
  for (const candidate of resumeCandidates(bundle.checkpoints, pointed)) {
    throwIfAborted(signal, `run status of ${attemptDir}`);
    const probe =
      candidate.iteration === pointed && bundle.newestCheckpoint !== null
        ? bundle.newestCheckpoint
        : await probeLocalCheckpoint(candidate.dir, {
            needIteration: false,
            hashLegacyFile: false,
          });
    if ("missing" in probe) continue; // removed between the scan and the probe (a live run's retention)
    probes.set(candidate.dir, probe);
    if (probeFindings(probe).length === 0) break;
  }
  // Sizes are stats, a bounded number of checkpoints at once (10,000 checkpoints are 30,000 stats).
  const checkpoints = await mapPool([...bundle.checkpoints].reverse(), MEASURE_CONCURRENCY, async (info) => {
    throwIfAborted(signal, `run status of ${attemptDir}`);
    const row = {
      iteration: info.iteration,
      dir: info.dir,
      latest: info.isLatest === true,
      pastPointer: pointed === undefined || info.iteration > pointed,
      hasOptimizer: info.hasOptimizer,
      upload: info.uploaded,
    };
    const probe = probes.get(info.dir);
    if (probe === undefined) {
      const listed = componentsListed(info.dir, info.entries ?? []);
      const components = await measureComponents(listed.components);
      return {
        ...row,
        complete: null,
        problems: [],
        depth: "listed",
        format: listed.format ?? "unknown",
        components,
        bytes: totalBytes(components),
        validation: null,
        manifestSha256: null,
      } satisfies CheckpointStatus;
    }
    const components = await measureComponents(probe.components);
    const problems = probeFindings(probe);
    return {
      ...row,
      complete: problems.length === 0,
      problems,
      depth: "probed",
      format: probe.format,
      components,
      bytes: totalBytes(components),
      validation: probe.validation ?? null,
      manifestSha256: probe.manifestSha256 ?? null,
    } satisfies CheckpointStatus;
  });
  const artifacts: ArtifactStatus[] = bundle.artifacts.map((a) => ({
    iteration: a.iteration,
    dir: a.dir,
    components: a.logicalComponents ?? [],
    bytes: a.payloads.reduce((sum, p) => sum + p.size, 0),
    local: artifactLocality(a),
    archivedTo: archivedTo(a),
  }));
  return {
    ok: bundle.problems.length === 0,
    attemptDir,
    pointer: bundle.latest,
    resume: resumeOf(bundle),
    checkpoints,
    artifacts,
    pendingValidation: checkpoints
      .filter((c) => c.validation !== null && c.validation !== "published")
      .map((c) => ({ iteration: c.iteration, state: c.validation! })),
    problems: bundle.problems,
  };
}
