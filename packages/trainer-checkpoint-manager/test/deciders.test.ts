import type { CheckpointInfo } from "@ckpt/retention";
import { describe, expect, it } from "vitest";
import {
  decideLease,
  decideResume,
  iterationFromPath,
  type LeaseRecord,
  type ProbedCheckpoint,
  type ResumeInputs,
  retentionCandidates,
} from "../src/index.js";

const complete = (
  iteration: number | undefined,
  extra: Partial<ProbedCheckpoint> = {},
): ProbedCheckpoint => ({
  iterDir: `/a/checkpoints/iter_${iteration}`,
  iteration,
  format: "consolidated",
  components: { model: "/m", optim: "/o", trainer: "/t" },
  manifestSha256: "a".repeat(64),
  problems: [],
  ...extra,
});

const base: ResumeInputs = { resume: "auto", attemptDir: "/a", pin: null, pointer: { state: "absent" } };
const present = (iteration: number, extra: Partial<ProbedCheckpoint> = {}) =>
  ({
    state: "present",
    path: "/a/checkpoints/latest_checkpoint.txt",
    iteration,
    checkpoint: complete(iteration, extra),
  }) as const;
const artifact = (iteration: number) => ({ iteration, dir: `/a/checkpoint_artifacts/iter_${iteration}` });

describe("decideResume: resume=auto (seed 001 Resume table)", () => {
  it("fresh start when the attempt has no latest checkpoint", () => {
    expect(decideResume(base)).toMatchObject({ kind: "fresh", attemptDir: "/a" });
  });
  it("the checkpoint latest_checkpoint.txt names", () => {
    expect(decideResume({ ...base, pointer: present(100) })).toMatchObject({
      kind: "checkpoint",
      source: "auto",
      iteration: 100,
    });
  });
  it("a damaged pointer never selects a resume", () => {
    expect(() =>
      decideResume({ ...base, pointer: { state: "invalid", path: "/p", message: "bad." } }),
    ).toThrow(expect.objectContaining({ code: "MANAGER_RESUME_POINTER_INVALID" }));
  });
  it("an incomplete latest checkpoint is refused, naming its problems", () => {
    const pointer = present(100, { problems: ["optim.pt is missing"] });
    expect(() => decideResume({ ...base, pointer })).toThrow(/optim.pt is missing/);
  });
  it("reports an open validation transaction, not a published one", () => {
    expect(
      decideResume({ ...base, pointer: present(100, { validation: "publication_pending" }) }),
    ).toMatchObject({
      validation: "publication_pending",
    });
    expect(decideResume({ ...base, pointer: present(100, { validation: "published" }) })).not.toHaveProperty(
      "validation",
    );
  });
});

describe("decideResume: no cold restart over an artifact (seed 000)", () => {
  it("refuses a fresh start in an attempt holding a committed artifact, naming the attempt and remedies", () => {
    const run = () => decideResume({ ...base, newestArtifact: artifact(300) });
    expect(run).toThrow(
      expect.objectContaining({ code: "MANAGER_COLD_RESTART_OVER_ARTIFACT", subject: "/a" }),
    );
    expect(run).toThrow(/resume=off/);
    expect(run).toThrow(/init_from/);
    expect(run).toThrow(/full component plan/);
  });
  it("refuses a full checkpoint behind the newest artifact", () => {
    expect(() => decideResume({ ...base, pointer: present(200), newestArtifact: artifact(300) })).toThrow(
      expect.objectContaining({ code: "MANAGER_RESUME_BEHIND_ARTIFACT" }),
    );
  });
  it("resumes a full checkpoint at the artifact's iteration or beyond", () => {
    expect(decideResume({ ...base, pointer: present(300), newestArtifact: artifact(300) })).toMatchObject({
      iteration: 300,
    });
    expect(decideResume({ ...base, pointer: present(400), newestArtifact: artifact(300) })).toMatchObject({
      iteration: 400,
    });
  });
  it("resume=off inside an attempt with artifacts (the legacy flat layout) is refused too", () => {
    expect(() => decideResume({ ...base, resume: "off", newestArtifact: artifact(1) })).toThrow(
      expect.objectContaining({ code: "MANAGER_COLD_RESTART_OVER_ARTIFACT" }),
    );
  });
  it("resume=off in a fresh attempt starts fresh", () => {
    expect(decideResume({ ...base, resume: "off" })).toMatchObject({ kind: "fresh" });
  });
});

describe("decideResume: explicit checkpoint", () => {
  const explicitBase = { ...base, resume: "/x/iter_50" };
  it("must exist", () => {
    expect(() => decideResume({ ...explicitBase, explicit: { missing: true, path: "/x/iter_50" } })).toThrow(
      expect.objectContaining({ code: "MANAGER_RESUME_NOT_FOUND", knob: "resume" }),
    );
  });
  it("must be complete", () => {
    expect(() =>
      decideResume({ ...explicitBase, explicit: complete(50, { problems: ["model.pt is missing"] }) }),
    ).toThrow(expect.objectContaining({ code: "MANAGER_RESUME_INCOMPLETE" }));
  });
  it("resumes when no artifact constrains it, even without a known iteration", () => {
    expect(
      decideResume({ ...explicitBase, explicit: complete(undefined, { format: "legacy_file" }) }),
    ).toMatchObject({
      source: "explicit",
      iteration: undefined,
    });
  });
  it("must be at or beyond the newest artifact of the adopted attempt", () => {
    expect(() =>
      decideResume({ ...explicitBase, explicit: complete(50), newestArtifact: artifact(60) }),
    ).toThrow(expect.objectContaining({ code: "MANAGER_RESUME_BEHIND_ARTIFACT" }));
    expect(
      decideResume({ ...explicitBase, explicit: complete(60), newestArtifact: artifact(60) }),
    ).toMatchObject({ iteration: 60 });
  });
  it("with artifacts present, an iteration that cannot be established is refused", () => {
    expect(() =>
      decideResume({ ...explicitBase, explicit: complete(undefined), newestArtifact: artifact(60) }),
    ).toThrow(expect.objectContaining({ code: "MANAGER_RESUME_ITERATION_UNKNOWN" }));
  });
  it("a pin must match the manifest's SHA-256 (seed 002 pinned resume)", () => {
    const explicit = complete(50);
    expect(decideResume({ ...explicitBase, explicit, pin: "a".repeat(64) })).toMatchObject({
      manifestSha256: "a".repeat(64),
    });
    expect(() => decideResume({ ...explicitBase, explicit, pin: "b".repeat(64) })).toThrow(
      expect.objectContaining({ code: "MANAGER_RESUME_PIN_MISMATCH", knob: "resume_sha256" }),
    );
  });
  it("a pin on a checkpoint without a manifest is refused", () => {
    const { manifestSha256: _, ...withoutManifest } = complete(50);
    expect(() => decideResume({ ...explicitBase, explicit: withoutManifest, pin: "a".repeat(64) })).toThrow(
      expect.objectContaining({ code: "MANAGER_RESUME_PIN_UNAVAILABLE" }),
    );
  });
  it("carries a multi-role boundary's roles and opaque loop_state verbatim", () => {
    const roles = {
      policy: { components: {}, optimizerStep: 7 },
      critic: { components: {}, optimizerStep: 12 },
    };
    const loopState = { critic_warmup_iterations: 5, note: null };
    expect(decideResume({ ...explicitBase, explicit: complete(12, { roles, loopState }) })).toMatchObject({
      roles,
      loopState,
    });
  });
});

describe("iterationFromPath: a legacy path is placed by its last iter_* segment", () => {
  it("finds the segment anywhere in the path", () => {
    expect(iterationFromPath("/runs/a/checkpoints/iter_000000100")).toBe(100);
    expect(iterationFromPath("/runs/a/iter_000300/state.pt")).toBe(300);
    expect(iterationFromPath("/runs/iter_1/x/iter_2/y.pt")).toBe(2);
    expect(iterationFromPath("/runs/a/state.pt")).toBeUndefined();
  });
});

describe("decideLease: the direct-primary writer lease (beyond the seed)", () => {
  const lease = (extra: Partial<LeaseRecord> = {}): LeaseRecord => ({
    schema: "posttrain.writer-lease.v1",
    epoch: 3,
    holder: { host: "node-a", pid: 42, run_ts: "20260901120000", token: "1".repeat(32) },
    acquired_at: "2026-09-01T12:00:00.000Z",
    expires_at: "2026-09-01T12:10:00.000Z",
    released: false,
    ...extra,
  });
  const now = new Date("2026-09-01T12:05:00.000Z");
  it("no lease yet: create epoch 1", () => {
    expect(decideLease(undefined, now, "2".repeat(32))).toEqual({ action: "create", epoch: 1 });
  });
  it("a live lease of another writer is refused", () => {
    expect(decideLease(lease(), now, "2".repeat(32))).toMatchObject({
      action: "refuse",
      current: { epoch: 3 },
    });
  });
  it("an expired lease is taken over by the next epoch", () => {
    expect(decideLease(lease(), new Date("2026-09-01T12:10:00.001Z"), "2".repeat(32))).toEqual({
      action: "create",
      epoch: 4,
    });
  });
  it("a released lease is taken over at once", () => {
    expect(decideLease(lease({ released: true }), now, "2".repeat(32))).toEqual({
      action: "create",
      epoch: 4,
    });
  });
});

describe("retentionCandidates: what local retention may count", () => {
  const info = (iteration: number): CheckpointInfo => ({
    iteration,
    dir: `/a/iter_${iteration}`,
    hasOptimizer: true,
    uploaded: "none",
  });
  it("only committed checkpoints (at or before the latest pointer), none with an open validation transaction", () => {
    const infos = [info(1), info(2), info(3), info(4)];
    expect(retentionCandidates(infos, 3, new Set([2])).map((i) => i.iteration)).toEqual([1, 3]);
  });
  it("nothing before a first pointer exists", () => {
    expect(retentionCandidates([info(1)], undefined, new Set())).toEqual([]);
  });
});
