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
import { type Evidence, evidenceSchema } from "@ckpt/evidence";

type Bundle = Evidence & { ok: boolean };

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

async function evidence(
  dir: string,
  ...flags: string[]
): Promise<{ code: number; bundle: Bundle; human: string }> {
  const json = captureIo();
  const code = await runCli(["evidence", dir, "--json", ...flags], json.io);
  const human = captureIo();
  await runCli(["evidence", dir, ...flags], human.io);
  const bundle = JSON.parse(json.out()) as Bundle;
  const { ok: _ok, ...rest } = bundle;
  expect(evidenceSchema.parse(rest)).toEqual(rest);
  return { code, bundle, human: human.out() };
}

describe("ckpt evidence", () => {
  it("bundles the attempt, its resume decision, checkpoints with retention state and the artifact not yet archived", async () => {
    const { attemptDir } = await attempt();
    const { code, bundle, human } = await evidence(attemptDir, "--verify", "newest");
    expect(code).toBe(0);
    expect(bundle).toMatchObject({
      ok: true,
      schema: "ckpt.evidence.v2",
      status: "resumable",
      complete: true,
    });
    // The one problem is a warning: the artifact's only copy is local.
    expect(bundle.problems.map((p) => [p.code, p.severity])).toEqual([["NOT_ARCHIVED", "warning"]]);
    const [only] = bundle.attempts;
    expect(only).toMatchObject({
      minted: "first",
      windows: 1,
      pointer: { state: "present", iteration: 30 },
      resume: { decision: "checkpoint", iteration: 30 },
    });
    const [newest, ...older] = only!.checkpoints;
    expect(newest).toMatchObject({
      iteration: 30,
      resume: { resumable: true },
      retention: { latest: true, has_optimizer: true, past_pointer: false },
      last_verify: { ok: true, problems: [] },
    });
    expect(newest!.components.map((c) => [c.name, c.present])).toEqual([
      ["model", true],
      ["optim", true],
      ["trainer", true],
    ]);
    expect(newest!.files?.map((f) => f.path)).toEqual(["model.pt", "optim.pt", "trainer.pt"]);
    for (const f of newest!.files ?? []) expect(f.size).toBeGreaterThan(0);
    expect(newest!.bytes).toBe(newest!.components.reduce((s, c) => s + c.bytes, 0));
    expect(
      older.map((c) => [c.iteration, c.retention.has_optimizer, c.resume.resumable, c.last_verify]),
    ).toEqual([
      [20, false, null, null],
      [10, false, null, null],
    ]);
    expect(only!.artifacts).toEqual([
      expect.objectContaining({
        iteration: 15,
        components: ["model"],
        payloads: [expect.objectContaining({ path: "model.pt", local: true })],
        resume: expect.objectContaining({ resumable: false }),
        archive: null,
        last_verify: expect.objectContaining({ ok: true }),
      }),
    ]);
    expect(bundle.storage).toMatchObject({ probed: false });
    expect(human).toContain(`${attemptDir}: resumable`);
    expect(human).toContain("NOT_ARCHIVED (warning)");
    // The run directory gives the same attempt.
    const run = await evidence(join(attemptDir, ".."));
    expect(run.bundle.attempts.map((a) => a.dir)).toEqual([attemptDir]);
  }, 60_000);

  it("shows the archive receipt and the released payload after publish and prune-verified", async () => {
    const { root, attemptDir, artifactDir } = await attempt();
    const store = await openStore(`file://${join(root, "archive")}/a/checkpoint_artifacts/iter_000000015`);
    await publishArtifact(artifactDir, store);
    const pruned = await pruneVerified([artifactDir]);
    expect(pruned.errors).toEqual([]);
    const { bundle } = await evidence(attemptDir);
    expect(bundle.attempts[0]!.artifacts[0]).toMatchObject({
      payloads: [{ path: "model.pt", local: false }],
      retention: { local: "released" },
      archive: { destination: expect.stringMatching(/^file:\/\//) },
    });
    expect(bundle.attempts[0]!.artifacts[0]!.archive!.files.map((f) => f.path)).toContain("model.pt");
    expect(bundle.problems).toEqual([]);
  }, 60_000);

  it("reports the manager's refusal and the probe's findings for a truncated newest checkpoint, exit 1", async () => {
    const { attemptDir } = await attempt();
    await truncate(join(attemptDir, "checkpoints", "iter_000000030", "model.pt"), 100);
    const { code, bundle } = await evidence(attemptDir);
    expect(code).toBe(1);
    expect(bundle.status).toBe("refused");
    expect(bundle.attempts[0]!.resume).toMatchObject({
      decision: "refused",
      code: "MANAGER_RESUME_INCOMPLETE",
    });
    // The refusal, then each problem verify finds (the truncated zip is unreadable and short), each
    // mapped onto the closed set with the library's code kept as the cause.
    const [refusal, ...found] = bundle.problems.filter((p) => p.code !== "NOT_ARCHIVED");
    expect(refusal).toMatchObject({ code: "RESUME_REFUSED", cause: "MANAGER_RESUME_INCOMPLETE" });
    expect(found.map((p) => [p.code, p.cause])).toEqual([
      ["UNREADABLE_TENSOR_FILE", "FILE_UNREADABLE"],
      ["DAMAGED_CHECKPOINT", "VERIFY_SIZE_MISMATCH"],
    ]);
    expect(found[0]!.subject).toContain("iter_000000030");
    expect(bundle.attempts[0]!.checkpoints[0]).toMatchObject({ iteration: 30, resume: { resumable: false } });
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
