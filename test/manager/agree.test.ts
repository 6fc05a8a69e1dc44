// @module-tag torch
// One judge: `ckpt verify`, `ckpt resumable`, `ckpt run status` and `ckpt evidence` (the built CLI)
// never disagree on the same checkpoint. A real dcp-format checkpoint is committed by the manager
// (model/ and optim/ written by torch 2's torch.distributed.checkpoint.save on two gloo ranks), then
// copies of it are damaged one way each (the description records sizes and SHA-256s); on every copy
// the four commands must all say "bad" with the
// same first problem (code and file), and all say "good" on the intact one.
import { execFile } from "node:child_process";
import { appendFile, cp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { writeTorchFile } from "@ckpt/tensors";
import { testdir, torch2Python } from "@ckpt/test-utils";
import { CheckpointManager, parseManagerConfig } from "@ckpt/trainer-checkpoint-manager";
import { beforeAll, describe, expect, it } from "vitest";
import { CLI_BIN, REPO_ROOT } from "../helpers/crash.js";

const run = promisify(execFile);
const WRITE_DCP = join(REPO_ROOT, "test", "manager", "fixtures", "write_dcp.py");
const ITER = join("checkpoints", "iter_000000001");

/** What one command said: good or bad, and its first problem as `<code> <path relative to the checkpoint>`. */
interface Verdict {
  readonly ok: boolean;
  readonly first: string | null;
}

async function ckpt(args: readonly string[]): Promise<{ code: number; report: Record<string, unknown> }> {
  try {
    const { stdout } = await run(process.execPath, [CLI_BIN, ...args, "--json"]);
    return { code: 0, report: JSON.parse(stdout) as Record<string, unknown> };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string };
    if (typeof failed.code !== "number" || !failed.stdout) throw error;
    return { code: failed.code, report: JSON.parse(failed.stdout) as Record<string, unknown> };
  }
}

/** `<code> <path>` of a probe's problem line (`<code> <path>: <message>`). */
const head = (line: string | undefined): string | null => (line === undefined ? null : line.split(":")[0]!);

/** The parts of a `ckpt.evidence.v2` attempt this test reads. */
interface EvidenceAttemptJson {
  checkpoints: Array<{ retention: { latest: boolean }; resume: { findings: string[] } }>;
}

async function verdicts(attemptDir: string): Promise<Record<string, Verdict>> {
  const iterDir = join(attemptDir, ITER);
  const verify = await ckpt(["verify", iterDir]);
  const problems = verify.report.problems as Array<{ code: string; path: string }>;
  const resumable = await ckpt(["resumable", iterDir]);
  const status = await ckpt(["run", "status", attemptDir]);
  // run status is the attempt's entry of the evidence bundle: the same checkpoint, read apart.
  const latest = (status.report.attempt as EvidenceAttemptJson).checkpoints.find((c) => c.retention.latest);
  const evidence = await ckpt(["evidence", attemptDir]);
  const [attempt] = evidence.report.attempts as EvidenceAttemptJson[];
  const newest = attempt!.checkpoints.find((c) => c.retention.latest)!;
  return {
    verify: {
      ok: verify.code === 0,
      first: problems[0] === undefined ? null : `${problems[0].code} ${problems[0].path}`,
    },
    resumable: { ok: resumable.code === 0, first: head((resumable.report.problems as string[])[0]) },
    "run status": { ok: status.code === 0, first: head(latest?.resume.findings[0]) },
    evidence: {
      ok: evidence.code === 0,
      first: head(newest.resume.findings[0]),
    },
  };
}

let root = "";
let intact = "";

beforeAll(async () => {
  root = await testdir("ckpt-agree-");
  const manager = await CheckpointManager.open({
    config: parseManagerConfig({ checkpoint_format: "dcp", save_every: 1, save_async: false }).config,
    outputRoot: join(root, "intact"),
    project: "p",
    group: "g",
    name: "n",
    termination: { signals: false, sentinelPath: null },
  });
  try {
    const plan = manager.planSave(1, { cadence: true })!;
    const session = await manager.beginSave(1, plan);
    await run(torch2Python(), [WRITE_DCP, session.targets.model!, session.targets.optim!]);
    await writeTorchFile(session.targets.trainer!, {
      tree: { step: 1, rng: { dtype: "U8", shape: [16] } },
      provideTensor: () => new Uint8Array(16),
      sync: false,
    });
    await manager.commitSave(session);
    intact = manager.attemptDir;
  } finally {
    await manager.finalize();
  }
}, 300_000);

/** A copy of the intact run, damaged by `damage` (given the copy's iteration directory); its attempt directory. */
async function damagedCopy(name: string, damage: (iterDir: string) => Promise<unknown>): Promise<string> {
  const attemptDir = join(root, name, relative(join(root, "intact"), intact));
  await cp(join(root, "intact"), join(root, name), { recursive: true });
  await damage(join(attemptDir, ITER));
  return attemptDir;
}

describe("verify, resumable, run status and evidence agree", () => {
  it("all good on the intact dcp checkpoint", async () => {
    const all = await verdicts(intact);
    for (const verdict of Object.values(all)) expect(verdict).toEqual({ ok: true, first: null });
  });

  const cases: Array<[string, (iterDir: string) => Promise<unknown>, string]> = [
    [
      "missing .metadata",
      (d) => rm(join(d, "model", ".metadata")),
      "VERIFY_COMPONENT_MISSING model/.metadata",
    ],
    ["a missing shard", (d) => rm(join(d, "optim", "__1_0.distcp")), "DCP_FILE_MISSING optim/__1_0.distcp"],
    [
      "a truncated shard",
      (d) => truncate(join(d, "model", "__0_0.distcp"), 10),
      "DCP_FILE_SHORT model/__0_0.distcp",
    ],
    ["a missing component file", (d) => rm(join(d, "trainer.pt")), "VERIFY_COMPONENT_MISSING trainer.pt"],
    [
      "a size that disagrees with the description",
      (d) => appendFile(join(d, "model", "__1_0.distcp"), "x"),
      "VERIFY_SIZE_MISMATCH model/__1_0.distcp",
    ],
    [
      "a digest mismatch (same size, one byte flipped)",
      async (d) => {
        const shard = join(d, "optim", "__0_0.distcp");
        const bytes = await readFile(shard);
        bytes[bytes.length - 1]! ^= 0xff;
        await writeFile(shard, bytes);
      },
      "VERIFY_DIGEST_MISMATCH optim/__0_0.distcp",
    ],
  ];
  for (const [what, damage, first] of cases) {
    it(`all bad on ${what}, first problem ${first}`, async () => {
      const attemptDir = await damagedCopy(what.replace(/[^a-z]+/g, "-"), damage);
      const all = await verdicts(attemptDir);
      for (const [command, verdict] of Object.entries(all))
        expect({ command, ...verdict }).toEqual({ command, ok: false, first });
    });
  }
});
