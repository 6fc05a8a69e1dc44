// `ckpt evidence` on run attempts written for real by the checkpoint manager (the demo trainer),
// then archived, released and damaged with the libraries and the file system.
import { mkdir, truncate } from "node:fs/promises";
import { join } from "node:path";
import { publishArtifact } from "@ckpt/archive-publisher";
import { openStore } from "@ckpt/object-store";
import { pruneVerified } from "@ckpt/retention";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { train } from "../src/demo/train.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

interface Bundle {
  ok: boolean;
  schema: string;
  status: string;
  resume: { kind: string; iteration?: number; code?: string };
  latest: { state: string; iteration?: number };
  newestCheckpoint: { iteration: number; problems: string[] } | null;
  newestCheckpointFiles: { path: string; size: number; component: string }[] | null;
  checkpoints: { iteration: number; hasOptimizer: boolean; isLatest?: boolean }[];
  artifacts: {
    iteration: number;
    logicalComponents: string[];
    payloads: { path: string; local: boolean }[];
    receipt: { destination: { scheme: string } } | null;
  }[];
  problems: { code: string; subject: string; message: string }[];
}

async function attempt(): Promise<{ root: string; attemptDir: string; artifactDir: string }> {
  const root = await testdir("ckpt-evidence-");
  const result = await train({
    outputRoot: join(root, "runs"),
    name: "ev",
    steps: 30,
    saveEvery: 10,
    keepOptimLast: 1,
    keepModelLast: 0,
    validateAt: [15],
    initSeed: 1,
    taskSeed: 2,
    dataSeed: 3,
  });
  const artifact = result.saves.find((s) => s.kind === "artifact");
  if (!artifact) throw new Error("the run committed no artifact");
  return { root, attemptDir: result.attemptDir, artifactDir: artifact.dir };
}

async function evidence(dir: string): Promise<{ code: number; bundle: Bundle; human: string }> {
  const json = captureIo();
  const code = await runCli(["evidence", dir, "--json"], json.io);
  const human = captureIo();
  await runCli(["evidence", dir], human.io);
  return { code, bundle: JSON.parse(json.out()) as Bundle, human: human.out() };
}

describe("ckpt evidence", () => {
  it("bundles resume decision, checkpoints as retention sees them and the artifact not yet archived", async () => {
    const { attemptDir } = await attempt();
    const { code, bundle, human } = await evidence(attemptDir);
    expect(code).toBe(0);
    expect(bundle).toMatchObject({ ok: true, schema: "ckpt.evidence.v1", status: "resumable", problems: [] });
    expect(bundle.resume).toMatchObject({ kind: "checkpoint", iteration: 30 });
    expect(bundle.latest).toMatchObject({ state: "present", iteration: 30 });
    expect(bundle.newestCheckpoint).toMatchObject({ iteration: 30, problems: [] });
    expect(bundle.newestCheckpointFiles?.map((f) => [f.component, f.path])).toEqual([
      ["model", "model.pt"],
      ["optim", "optim.pt"],
      ["trainer", "trainer.pt"],
    ]);
    for (const f of bundle.newestCheckpointFiles ?? []) expect(f.size).toBeGreaterThan(0);
    expect(bundle.checkpoints.map((c) => [c.iteration, c.hasOptimizer, c.isLatest === true])).toEqual([
      [10, false, false],
      [20, false, false],
      [30, true, true],
    ]);
    expect(bundle.artifacts).toEqual([
      expect.objectContaining({
        iteration: 15,
        logicalComponents: ["model"],
        payloads: [expect.objectContaining({ path: "model.pt", local: true })],
        receipt: null,
      }),
    ]);
    expect(human).toContain(`${attemptDir}: resumable`);
  }, 60_000);

  it("shows the archive receipt and the released payload after publish and prune-verified", async () => {
    const { root, attemptDir, artifactDir } = await attempt();
    const store = await openStore(`file://${join(root, "archive")}/a/checkpoint_artifacts/iter_000000015`);
    await publishArtifact(artifactDir, store);
    const pruned = await pruneVerified([artifactDir]);
    expect(pruned.errors).toEqual([]);
    const { bundle } = await evidence(attemptDir);
    expect(bundle.artifacts[0]).toMatchObject({
      payloads: [{ path: "model.pt", local: false }],
      receipt: { destination: { scheme: "file" } },
    });
  }, 60_000);

  it("reports the manager's refusal and the probe's findings for a truncated newest checkpoint, exit 1", async () => {
    const { attemptDir } = await attempt();
    await truncate(join(attemptDir, "checkpoints", "iter_000000030", "model.pt"), 100);
    const { code, bundle } = await evidence(attemptDir);
    expect(code).toBe(1);
    expect(bundle.status).toBe("refused");
    expect(bundle.resume).toMatchObject({ kind: "refused", code: "MANAGER_RESUME_INCOMPLETE" });
    // The refusal, then each problem verify finds (the truncated zip is unreadable and short).
    const [refusal, ...found] = bundle.problems;
    expect(refusal!.code).toBe("MANAGER_RESUME_INCOMPLETE");
    expect(found.map((p) => p.code)).toEqual(["CHECKPOINT_INCOMPLETE", "CHECKPOINT_INCOMPLETE"]);
    expect(found.map((p) => p.message.split(":")[0])).toEqual([
      "FILE_UNREADABLE model.pt",
      "VERIFY_SIZE_MISMATCH model.pt",
    ]);
    expect(found[0]!.subject).toContain("iter_000000030");
  }, 60_000);

  it("refuses a path that is not a directory (exit 2)", async () => {
    const c = captureIo();
    expect(await runCli(["evidence", "/nonexistent/attempt"], c.io)).toBe(2);
    expect(c.err()).toContain("/nonexistent/attempt is not a directory");
  });

  it("refuses a directory that is not a run attempt (exit 2), naming the attempt of a checkpoint root or checkpoint", async () => {
    const root = await testdir("ckpt-cli-evidence-refuse-");
    const plain = captureIo();
    expect(await runCli(["evidence", root], plain.io)).toBe(2);
    expect(plain.err()).toContain(`${root} holds neither checkpoints/ nor checkpoint_artifacts/`);
    const attempt = join(root, "p", "g", "n", "20260901120000");
    const iterDir = join(attempt, "checkpoints", "iter_000000010");
    await mkdir(iterDir, { recursive: true });
    const checkpointRoot = captureIo();
    expect(await runCli(["evidence", join(attempt, "checkpoints"), "--json"], checkpointRoot.io)).toBe(2);
    expect(JSON.parse(checkpointRoot.out()).error.message).toContain(`pass its run attempt ${attempt}`);
    const checkpoint = captureIo();
    expect(await runCli(["run", "status", iterDir], checkpoint.io)).toBe(2);
    expect(checkpoint.err()).toContain(`is checkpoint iteration 10; pass its run attempt ${attempt}`);
  });
});
