import { stat } from "node:fs/promises";
import type { ResumeDecision } from "@ckpt/trainer-checkpoint-manager";
import { UsageError } from "../errors.js";
import type { CkptCommand } from "./registry.js";

interface ResumableArgs {
  "iter-dir": string;
  sha256?: string;
}

/** The answer: the manager's resume decision for `resume=<iter-dir>`, or its refusal. */
export interface ResumableReport {
  readonly ok: boolean;
  readonly resumable: boolean;
  readonly path: string;
  /** Why (the manager's reason), or the refusal's message. */
  readonly reason: string;
  /** The refusal's code (`MANAGER_RESUME_INCOMPLETE`, `MANAGER_RESUME_BEHIND_ARTIFACT`, ...). */
  readonly code: string | null;
  readonly iteration: number | null;
  readonly format: string | null;
  readonly components: Readonly<Record<string, string>>;
  readonly manifestSha256: string | null;
  /** The validation transaction the checkpoint is in, when it is not published. */
  readonly validation: string | null;
  /** `latest_checkpoint.txt` of its attempt names it (null when it is not under a checkpoints/ root). */
  readonly latest: boolean | null;
  /** What the probe found missing or wrong (empty when complete). */
  readonly problems: readonly string[];
}

export function renderResumable(r: ResumableReport): string {
  const lines = [
    r.resumable ? `yes: ${r.reason}` : `no${r.code === null ? "" : ` (${r.code})`}: ${r.reason}`,
  ];
  if (r.resumable) {
    lines.push(`  components: ${Object.keys(r.components).join(", ") || "-"}`);
    if (r.manifestSha256 !== null) lines.push(`  manifest sha256: ${r.manifestSha256}`);
    if (r.validation !== null) lines.push(`  validation: ${r.validation} (resume finishes the transaction)`);
  }
  if (r.latest === false) lines.push("  note: latest_checkpoint.txt of its attempt names another iteration");
  return lines.join("\n");
}

const SHA256 = /^[0-9a-f]{64}$/;

export const resumableCommand: CkptCommand<ResumableArgs> = {
  command: "resumable <iter-dir>",
  describe: "Would training resume from this checkpoint? yes (exit 0) or no with the reason (exit 1)",
  builder: (yargs) =>
    yargs
      .positional("iter-dir", {
        type: "string",
        demandOption: true,
        describe: "A checkpoints/iter_* directory (or a legacy single .pt checkpoint)",
      })
      .option("sha256", {
        type: "string",
        describe: "Also require its manifest to have this SHA-256 (a pinned resume, resume_sha256)",
      })
      .example(
        "ckpt resumable out/p/g/run/20260901120000/checkpoints/iter_000000100",
        "yes, or no with the reason (incomplete, behind a committed artifact, ...)",
      )
      .example(
        "ckpt resumable ./iter_000000100 --sha256 3f5a...e1 --json",
        "the pinned check, as a JSON report",
      ),
  async run(args) {
    const path = args["iter-dir"];
    const pin = args.sha256?.toLowerCase() ?? null;
    if (pin !== null && !SHA256.test(pin)) {
      throw new UsageError(`--sha256 ${args.sha256}: expected 64 hexadecimal digits`);
    }
    const exists = await stat(path).then(
      () => true,
      () => false,
    );
    if (!exists) throw new UsageError(`${path} does not exist; pass a checkpoints/iter_* directory`);
    const { classifyIterPath, LATEST_POINTER } = await import("@ckpt/manifest");
    const { decideResume, listCommittedArtifacts, localCheckpointsRoot, probeLocalCheckpoint } = await import(
      "@ckpt/trainer-checkpoint-manager"
    );
    // Under checkpoints/ (or checkpoint_artifacts/): its attempt holds the pointer and the artifacts.
    const where = classifyIterPath(path);
    const probe = await probeLocalCheckpoint(path, { needIteration: true, hashLegacyFile: pin !== null });
    const problems = "missing" in probe ? [] : probe.problems;
    const newestArtifact =
      where === undefined ? undefined : (await listCommittedArtifacts(where.attemptDir)).at(-1);
    let latest: boolean | null = null;
    if (where !== undefined) {
      const pointer = await LATEST_POINTER.read(
        `${localCheckpointsRoot(where.attemptDir)}/${LATEST_POINTER.fileName}`,
      )
        .then((p) => p.iteration)
        .catch(() => undefined);
      latest = pointer === where.iteration;
    }
    let decision: ResumeDecision;
    try {
      decision = decideResume({
        resume: path,
        attemptDir: where?.attemptDir ?? path,
        pin,
        pointer: { state: "absent" },
        explicit: probe,
        ...(newestArtifact === undefined ? {} : { newestArtifact }),
      });
    } catch (error) {
      const refusal = error as { code?: unknown; kind?: unknown; message?: unknown };
      if (typeof refusal.code !== "string") throw error;
      const report: ResumableReport = {
        ...empty(path),
        reason: String(refusal.message),
        code: refusal.code,
        iteration: "missing" in probe ? null : (probe.iteration ?? null),
        latest,
        problems,
      };
      return { exitCode: 1, report, human: renderResumable(report) };
    }
    if (decision.kind !== "checkpoint") throw new Error(`an explicit resume decided ${decision.kind}`);
    const report: ResumableReport = {
      ok: true,
      resumable: true,
      path,
      reason: decision.reason,
      code: null,
      iteration: decision.iteration ?? null,
      format: decision.format,
      components: { ...decision.components },
      manifestSha256: decision.manifestSha256 ?? null,
      validation: decision.validation ?? null,
      latest,
      problems,
    };
    return { exitCode: 0, report, human: renderResumable(report) };
  },
};

function empty(path: string): ResumableReport {
  return {
    ok: false,
    resumable: false,
    path,
    reason: "",
    code: null,
    iteration: null,
    format: null,
    components: {},
    manifestSha256: null,
    validation: null,
    latest: null,
    problems: [],
  };
}
