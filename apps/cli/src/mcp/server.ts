import { relative } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { VERIFY_KINDS } from "@ckpt/verify";
import { z } from "zod";
import { describeFailure } from "@ckpt/command-line";
import { snakeCaseKeys } from "../json.js";
import { RequestBudget } from "./budget.js";
import {
  attemptStatus,
  checkpointResumable,
  explainCode,
  runEvidence,
  verifyTarget,
  volumeVerdict,
} from "./evidence-adapter.js";
import { listAttempts } from "./list.js";
import { type GuardedRoot, resolveInsideRoot } from "./path-guard.js";

/** What a tool hands back: the structured report and one or two lines for a reader. */
interface ToolAnswer {
  readonly report: Record<string, unknown>;
  readonly text: string;
}

export interface McpServerOptions {
  /** The time each request may take before it answers with what it has (`MCP_PARTIAL`). */
  readonly budgetMs: number;
}

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
const PATH_NOTE =
  "Relative to the served root, or absolute inside it; anything resolving outside is refused (MCP_PATH_REFUSED).";

/**
 * The read-only MCP server over `guarded.root`: every path argument goes through the path guard,
 * every answer is structured JSON plus a short text, every request answers within the budget.
 */
export function createCkptMcpServer(guarded: GuardedRoot, options: McpServerOptions): McpServer {
  const server = new McpServer({ name: "ckpt", version: __CKPT_PACKAGE_VERSION__ });
  const inside = (path: unknown) => resolveInsideRoot(guarded, path);
  const shown = (real: string) => relative(guarded.realRoot, real) || ".";

  /** Runs a tool within a fresh budget; a coded refusal becomes an error result carrying its code. */
  const respond = async (work: (budget: RequestBudget) => Promise<ToolAnswer>): Promise<CallToolResult> => {
    const budget = new RequestBudget(options.budgetMs);
    try {
      const { report, text } = await work(budget);
      // The keys `--json` prints: an agent reads the same vocabulary as an operator.
      const structuredContent = snakeCaseKeys(report) as Record<string, unknown>;
      return { content: [{ type: "text", text }], structuredContent };
    } catch (error) {
      const { code, message } = describeFailure(error);
      return {
        isError: true,
        content: [{ type: "text", text: `${code}: ${message}` }],
        structuredContent: { ok: false, error: { code, message } },
      };
    } finally {
      budget.dispose();
    }
  };

  /**
   * The library's report, or a partial answer naming what ran out of time, with what `found`
   * (a cheaper look started alongside: the attempt's listing) had by then.
   */
  const bounded = async <T extends object>(
    budget: RequestBudget,
    subject: string,
    what: string,
    work: Promise<T>,
    summary: (report: T) => string,
    found?: Promise<object>,
  ): Promise<ToolAnswer> => {
    const report = await budget.race(work);
    if (report === undefined) {
      const problem = budget.partial(subject, what);
      const partial = { ok: false, partial: true, ...(found === undefined ? {} : { found: await found }) };
      return { report: { ...partial, problems: [problem] }, text: `${subject}: ${problem.message}` };
    }
    return { report: { ...(report as Record<string, unknown>) }, text: summary(report) };
  };

  server.registerTool(
    "list",
    {
      title: "List runs, attempts and checkpoints",
      description:
        "Every run attempt (a directory holding checkpoints/ or checkpoint_artifacts/) under a directory of the served root, grouped by run, with the iterations of its checkpoints and artifacts. Paths in the answer are what the other tools take.",
      inputSchema: {
        path: z.string().optional().describe(`Where to look (default: the whole root). ${PATH_NOTE}`),
      },
      annotations: READ_ONLY,
    },
    ({ path }) =>
      respond(async (budget) => {
        const dir = await inside(path ?? ".");
        const report = await listAttempts(guarded.realRoot, dir, budget);
        const c = report.counts;
        const text = `${report.path}: ${c.runs} runs, ${c.attempts} attempts, ${c.checkpoints} checkpoints, ${c.artifacts} artifacts${report.partial ? " (partial: the budget ran out)" : ""}`;
        return { report: { ...report }, text };
      }),
  );

  server.registerTool(
    "status",
    {
      title: "Run attempt status",
      description:
        "A run attempt at a glance, as the ckpt.evidence.v2 bundle holds it: latest_checkpoint.txt, what resume=auto would pick and why, every checkpoint (components, sizes, resumable or not, retention state) and artifact (archive receipt), and problems from the closed set the explain tool describes.",
      inputSchema: {
        attempt: z
          .string()
          .describe(`The run attempt directory <project>/<group>/<name>/<RUN_TS>. ${PATH_NOTE}`),
      },
      annotations: READ_ONLY,
    },
    ({ attempt }) =>
      respond(async (budget) => {
        const dir = await inside(attempt);
        return bounded(
          budget,
          shown(dir),
          "run status",
          attemptStatus(dir, budget.signal),
          ({ attempt, problems, complete }) => {
            const r = attempt?.resume;
            const resume =
              r === undefined || r.decision === "unknown"
                ? "nothing it could tell"
                : r.decision === "checkpoint"
                  ? `iteration ${r.iteration ?? "?"}`
                  : r.decision === "fresh"
                    ? "a fresh start"
                    : `refused (${r.code})`;
            return `${shown(dir)}: resume would pick ${resume}; ${attempt?.checkpoints.length ?? 0} checkpoints, ${attempt?.artifacts.length ?? 0} artifacts, ${problems.length} problems${complete ? "" : " (incomplete)"}`;
          },
          listAttempts(guarded.realRoot, dir, budget),
        );
      }),
  );

  server.registerTool(
    "resumable",
    {
      title: "Would training resume from this checkpoint?",
      description:
        "ckpt resumable: yes, or no with the reason and its code (incomplete, behind a committed artifact, pinned digest mismatch, ...).",
      inputSchema: {
        checkpoint: z
          .string()
          .describe(`A checkpoints/iter_* directory (or a legacy .pt checkpoint). ${PATH_NOTE}`),
        sha256: z
          .string()
          .regex(/^[0-9a-fA-F]{64}$/)
          .optional()
          .describe("Also require its manifest to have this SHA-256 (a pinned resume)"),
      },
      annotations: READ_ONLY,
    },
    ({ checkpoint, sha256 }) =>
      respond(async (budget) => {
        const path = await inside(checkpoint);
        const work = checkpointResumable(path, sha256?.toLowerCase() ?? null);
        return bounded(budget, shown(path), "the resumable check", work, (r) =>
          r.resumable
            ? `${shown(path)}: resumable (${r.reason})`
            : `${shown(path)}: not resumable${r.code === null ? "" : ` (${r.code})`}: ${r.reason}`,
        );
      }),
  );

  server.registerTool(
    "verify",
    {
      title: "Verify against its records",
      description:
        "ckpt verify: judge a checkpoint, artifact, fetched stage, DCP or Hugging Face directory, or a .pt/.safetensors file against its own records; problems carry codes the explain tool describes.",
      inputSchema: {
        path: z.string().describe(`What to judge. ${PATH_NOTE}`),
        kind: z.enum(VERIFY_KINDS).optional().describe("Judge the path as this kind instead of detecting it"),
        deep: z
          .boolean()
          .optional()
          .describe("Also read every byte of .pt files and check each zip member's CRC-32"),
        finite: z.boolean().optional().describe("Also scan floating tensors for NaN/Inf"),
      },
      annotations: READ_ONLY,
    },
    ({ path, kind, deep, finite }) =>
      respond(async (budget) => {
        const target = await inside(path);
        const work = verifyTarget(target, {
          ...(kind === undefined ? {} : { kind }),
          deep: deep ?? false,
          finite: finite ?? false,
          signal: budget.signal,
        });
        return bounded(budget, shown(target), "verify", work, (r) =>
          r.ok
            ? `${shown(target)}: ${r.kind} sound`
            : `${shown(target)}: ${r.kind} ${r.problems.length} problems (${[...new Set(r.problems.map((p) => p.code))].join(", ")})`,
        );
      }),
  );

  server.registerTool(
    "evidence",
    {
      title: "Evidence bundle of a run or an attempt",
      description:
        "ckpt evidence: the ckpt.evidence.v2 bundle of a run (every attempt) or one attempt: attempts, checkpoints and artifacts (resumable and why, retention, archive receipt), the volume's storage tier, problems from a closed set the explain tool describes.",
      inputSchema: {
        path: z
          .string()
          .describe(
            `A run directory <project>/<group>/<name> (every attempt under it) or one attempt <name>/<RUN_TS>. ${PATH_NOTE}`,
          ),
      },
      annotations: READ_ONLY,
    },
    ({ path }) =>
      respond(async (budget) => {
        const dir = await inside(path);
        return bounded(
          budget,
          shown(dir),
          "the evidence bundle",
          runEvidence(dir, budget.signal),
          (b) =>
            `${shown(dir)}: ${b.status}; ${b.problems.length} problems${b.complete ? "" : " (incomplete)"}`,
          listAttempts(guarded.realRoot, dir, budget),
        );
      }),
  );

  server.registerTool(
    "storage",
    {
      title: "Storage tier of a volume",
      description:
        "The filesystem holding a directory and ckpt doctor volume's verdict on its tier (local, shared-safe, shared-unsafe), read from the mount table; the write probe of `ckpt doctor volume` is not run (probed: false).",
      inputSchema: {
        path: z.string().optional().describe(`A directory (default: the root). ${PATH_NOTE}`),
        expect: z
          .enum(["any", "shared"])
          .optional()
          .describe("shared: a local volume fails too (several nodes must read it)"),
      },
      annotations: READ_ONLY,
    },
    ({ path, expect }) =>
      respond(async (budget) => {
        const dir = await inside(path ?? ".");
        return bounded(budget, shown(dir), "the storage check", volumeVerdict(dir, expect ?? "any"), (v) => {
          const verdict = v.ok ? "sound" : `NOT sound: ${v.reasons.join("; ")}`;
          return `${shown(dir)}: ${v.filesystem.type}, ${v.tier}; ${verdict}`;
        });
      }),
  );

  server.registerTool(
    "explain",
    {
      title: "Explain a code",
      description:
        "What an error or problem code (CHECKPOINT_INCOMPLETE, VERIFY_DIGEST_MISMATCH, MCP_PATH_REFUSED, ...) means and what to do about it, from ckpt's troubleshooting registry.",
      inputSchema: {
        code: z.string().max(200).describe("The code, as a report or error shows it"),
      },
      annotations: READ_ONLY,
    },
    ({ code }) =>
      respond(async () => {
        const entry = explainCode(code);
        const text = entry.known
          ? `${entry.code}: ${entry.meaning} What to do: ${entry.remedy}`
          : `${entry.code} is not a ckpt code${entry.related.length > 0 ? `; codes with its prefix: ${entry.related.join(", ")}` : ""}`;
        return { report: { ok: entry.known, ...entry }, text };
      }),
  );

  return server;
}
