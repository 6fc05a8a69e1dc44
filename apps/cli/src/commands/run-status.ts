import { lstat, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { EvidenceBundle } from "@ckpt/trainer-checkpoint-manager";
import { UsageError } from "../errors.js";
import { formatBytes, table } from "../render.js";
import type { CkptCommandGroup, CkptCommand } from "./registry.js";

interface RunStatusArgs {
  "attempt-dir": string;
}

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
  /** The probe found nothing missing or wrong. */
  readonly complete: boolean;
  readonly problems: readonly string[];
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

/** Bytes of the regular files at a path (a file, or every file under a directory); undefined when absent. */
async function pathBytes(path: string): Promise<number | undefined> {
  const info = await lstat(path).catch(() => undefined);
  if (info === undefined) return undefined;
  if (!info.isDirectory()) return info.isFile() ? info.size : 0;
  let total = 0;
  for (const name of await readdir(path)) total += (await pathBytes(join(path, name))) ?? 0;
  return total;
}

function resumeOf(bundle: EvidenceBundle): RunStatusReport["resume"] {
  const r = bundle.resume;
  if (r.kind === "checkpoint") {
    return { decision: "checkpoint", iteration: r.iteration ?? null, iterDir: r.iterDir, reason: r.reason };
  }
  if (r.kind === "fresh") return { decision: "fresh", reason: r.reason };
  return { decision: "refused", code: r.code, reason: r.message };
}

/** Assembles the status from the manager's evidence bundle and its probe of every checkpoint. Read-only. */
export async function runStatus(attemptDir: string): Promise<RunStatusReport> {
  const { collectEvidence, probeLocalCheckpoint } = await import("@ckpt/trainer-checkpoint-manager");
  const bundle = await collectEvidence(attemptDir);
  const pointed = bundle.latest.state === "present" ? bundle.latest.iteration : undefined;
  const checkpoints: CheckpointStatus[] = [];
  for (const info of [...bundle.checkpoints].reverse()) {
    const probe = await probeLocalCheckpoint(info.dir, { needIteration: false, hashLegacyFile: false });
    if ("missing" in probe) continue; // removed between the scan and the probe (a live run's retention)
    const components: ComponentStatus[] = [];
    for (const [name, target] of Object.entries(probe.components)) {
      const directory = target.endsWith("/");
      const path = directory ? target.slice(0, -1) : target;
      const bytes = await pathBytes(path);
      components.push({
        name,
        path,
        kind: directory ? "directory" : "file",
        present: bytes !== undefined,
        bytes: bytes ?? 0,
      });
    }
    checkpoints.push({
      iteration: info.iteration,
      dir: info.dir,
      latest: info.isLatest === true,
      pastPointer: pointed === undefined || info.iteration > pointed,
      complete: probe.problems.length === 0,
      problems: probe.problems,
      format: probe.format,
      components,
      bytes: components.reduce((sum, c) => sum + c.bytes, 0),
      hasOptimizer: info.hasOptimizer,
      upload: info.uploaded,
      validation: probe.validation ?? null,
      manifestSha256: probe.manifestSha256 ?? null,
    });
  }
  const artifacts: ArtifactStatus[] = bundle.artifacts.map((a) => ({
    iteration: a.iteration,
    dir: a.dir,
    components: a.logicalComponents ?? [],
    bytes: a.payloads.reduce((sum, p) => sum + p.size, 0),
    local: a.payloads.every((p) => p.local) ? "yes" : a.payloads.some((p) => p.local) ? "partly" : "released",
    archivedTo:
      a.receipt === null
        ? null
        : `${a.receipt.destination.scheme}://${a.receipt.destination.bucket}/${a.receipt.destination.prefix}`,
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

function stateOf(c: CheckpointStatus): string {
  if (c.latest) return c.complete ? "latest" : "latest, INCOMPLETE";
  if (c.pastPointer) return "not committed";
  return c.complete ? "complete" : "not resumable";
}

function componentList(c: CheckpointStatus): string {
  const names = c.components.map(
    (x) => `${x.name}${x.kind === "directory" ? "/" : ""}${x.present ? "" : "(missing)"}`,
  );
  return names.join(",") || "-";
}

export function renderRunStatus(r: RunStatusReport): string {
  const pointer =
    r.pointer.state === "present"
      ? `iteration ${r.pointer.iteration}`
      : r.pointer.state === "absent"
        ? "none"
        : `INVALID (${r.pointer.message})`;
  const resume =
    r.resume.decision === "checkpoint"
      ? `iteration ${r.resume.iteration ?? "?"} (${r.resume.reason})`
      : r.resume.decision === "fresh"
        ? `a fresh start (${r.resume.reason})`
        : `REFUSED ${r.resume.code}: ${r.resume.reason}`;
  const lines = [r.attemptDir, `latest_checkpoint.txt: ${pointer}`, `resume=auto would pick: ${resume}`];
  if (r.checkpoints.length > 0) {
    lines.push(
      "",
      table(
        ["checkpoint", "state", "components", "size", "upload", "validation"],
        r.checkpoints.map((c) => [
          String(c.iteration),
          stateOf(c),
          componentList(c),
          formatBytes(c.bytes),
          c.upload,
          c.validation ?? "-",
        ]),
        new Set([0, 3]),
      ),
    );
  } else {
    lines.push("", "no checkpoints");
  }
  if (r.artifacts.length > 0) {
    lines.push(
      "",
      table(
        ["artifact", "components", "payload", "local", "archived to"],
        r.artifacts.map((a) => [
          String(a.iteration),
          a.components.join(","),
          formatBytes(a.bytes),
          a.local,
          a.archivedTo ?? "-",
        ]),
        new Set([0, 2]),
      ),
    );
  }
  for (const p of r.pendingValidation)
    lines.push(`pending validation: iteration ${p.iteration} (${p.state})`);
  for (const c of r.checkpoints.filter((x) => !x.complete && !x.pastPointer)) {
    lines.push(`iteration ${c.iteration}: ${c.problems.join("; ")}`);
  }
  lines.push("", r.problems.length === 0 ? "no problems" : `${r.problems.length} problem(s):`);
  for (const p of r.problems) lines.push(`  ${p.code} ${p.subject}: ${p.message}`);
  return lines.join("\n");
}

export const runStatusCommand: CkptCommand<RunStatusArgs> = {
  command: "status <attempt-dir>",
  describe:
    "A run attempt at a glance: checkpoints, components, sizes, pointer, receipts, pending validation, and what resume would pick and why",
  builder: (yargs) =>
    yargs
      .positional("attempt-dir", {
        type: "string",
        demandOption: true,
        describe: "The run attempt directory <output_root>/<project>/<group>/<name>/<RUN_TS>",
      })
      .example("ckpt run status out/p/g/run/20260901120000", "the table and the resume decision")
      .example("ckpt run status out/p/g/run/20260901120000 --json", "the same as a JSON report"),
  async run(args) {
    const dir = args["attempt-dir"];
    const isDir = await stat(dir).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (!isDir) {
      throw new UsageError(
        `${dir} is not a directory; pass a run attempt <output_root>/<project>/<group>/<name>/<RUN_TS>`,
      );
    }
    const { CHECKPOINTS_DIR, CHECKPOINT_ARTIFACTS_DIR } = await import("@ckpt/manifest");
    const looksLikeAttempt = await Promise.all(
      [CHECKPOINTS_DIR, CHECKPOINT_ARTIFACTS_DIR].map((d) =>
        stat(join(dir, d)).then(
          (s) => s.isDirectory(),
          () => false,
        ),
      ),
    );
    if (!looksLikeAttempt.some(Boolean)) {
      throw new UsageError(
        `${dir} holds neither ${CHECKPOINTS_DIR}/ nor ${CHECKPOINT_ARTIFACTS_DIR}/; pass a run attempt directory (the <RUN_TS> level)`,
      );
    }
    const report = await runStatus(dir);
    return { exitCode: report.ok ? 0 : 1, report, human: renderRunStatus(report) };
  },
};

/** `ckpt run ...`: training run attempts as the checkpoint manager sees them. */
export const runGroup: CkptCommandGroup = {
  command: "run <command>",
  describe: "Inspect a training run attempt",
  subcommands: [runStatusCommand],
};
