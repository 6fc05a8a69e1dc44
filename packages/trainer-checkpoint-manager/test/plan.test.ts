import { describe, expect, it } from "vitest";
import { cadenceDue, parseManagerConfig, planSave } from "../src/index.js";

const cfg = (raw: Record<string, unknown>) => parseManagerConfig(raw).config;
const FULL = ["model", "optimizer", "training_state"];

describe("planSave: regular cadence and final saves", () => {
  it("the default full plan at a cadence boundary is a full checkpoint", () => {
    expect(planSave(cfg({ save_every: 10 }), 10, { cadence: true })).toEqual({
      step: 10,
      kind: "full",
      components: FULL,
      reasons: ["cadence"],
      validation: "none",
      escalated: false,
    });
  });
  it("a partial regular plan makes an artifact", () => {
    const plan = planSave(cfg({ save_every: 10, checkpoint_components: ["model"] }), 20, { cadence: true });
    expect(plan).toMatchObject({ kind: "artifact", components: ["model"], reasons: ["cadence"] });
  });
  it("save_every=0 disables cadence and the normal-final save", () => {
    const config = cfg({ save_every: 0 });
    expect(planSave(config, 10, { cadence: true })).toBeUndefined();
    expect(planSave(config, 10, { final: true })).toBeUndefined();
  });
  it("the normal-final save happens off cadence", () => {
    expect(planSave(cfg({ save_every: 10 }), 17, { final: true })).toMatchObject({
      kind: "full",
      reasons: ["final"],
    });
  });
  it("a step the cadence already saved is not saved twice (final at a cadence step)", () => {
    expect(planSave(cfg({ save_every: 10 }), 20, { final: true }, { full: true })).toBeUndefined();
  });
  it("nothing due is no save", () => {
    expect(planSave(cfg({ save_every: 10 }), 13, {})).toBeUndefined();
  });
  it("refuses a negative or fractional step", () => {
    expect(() => planSave(cfg({}), -1, { cadence: true })).toThrow(/step -1/);
    expect(() => planSave(cfg({}), 1.5, { cadence: true })).toThrow(/step 1.5/);
  });
});

describe("planSave: validation and the union of regular and validation plans", () => {
  it("validation alone with save_checkpoint=false is ephemeral (no save)", () => {
    expect(planSave(cfg({ save_every: 10 }), 5, { validation: true })).toBeUndefined();
  });
  it("validation alone with save_checkpoint=true and the full plan is the durable pending transaction", () => {
    const plan = planSave(cfg({ validation: { save_checkpoint: true } }), 5, { validation: true });
    expect(plan).toMatchObject({ kind: "full", validation: "pending", reasons: ["validation"] });
  });
  it("a cadence full save coinciding with validation uses the durable transaction (full union)", () => {
    const plan = planSave(cfg({ save_every: 10 }), 10, { cadence: true, validation: true });
    expect(plan).toMatchObject({ kind: "full", validation: "pending", reasons: ["cadence", "validation"] });
  });
  it("regular and validation partial plans at one step are unioned into one save", () => {
    const config = cfg({
      save_every: 10,
      checkpoint_components: ["model"],
      validation: { save_checkpoint: true, checkpoint_components: ["training_state"] },
    });
    const plan = planSave(config, 10, { cadence: true, validation: true });
    expect(plan).toMatchObject({ kind: "artifact", components: ["model", "training_state"] });
  });
  it("a union that reaches the full plan is a full checkpoint with the durable transaction", () => {
    const config = cfg({
      save_every: 10,
      checkpoint_components: ["model", "optimizer"],
      validation: { save_checkpoint: true, checkpoint_components: ["training_state"] },
    });
    expect(planSave(config, 10, { cadence: true, validation: true })).toMatchObject({
      kind: "full",
      components: FULL,
      validation: "pending",
    });
  });
  it("a partial union with an independently due cadence save commits before validation", () => {
    const config = cfg({
      save_every: 10,
      checkpoint_components: ["model"],
      validation: { save_checkpoint: true, checkpoint_components: ["model"] },
    });
    expect(planSave(config, 10, { cadence: true, validation: true })).toMatchObject({
      validation: "commit_before",
    });
  });
  it("a partial cadence save with a non-saving validation also commits before validation", () => {
    const config = cfg({ save_every: 10, checkpoint_components: ["model"] });
    expect(planSave(config, 10, { cadence: true, validation: true })).toMatchObject({
      kind: "artifact",
      validation: "commit_before",
    });
  });
  it("a partial plan requested solely by validation evaluates first and commits after", () => {
    const config = cfg({
      save_every: 10,
      validation: { save_checkpoint: true, checkpoint_components: ["model"] },
    });
    expect(planSave(config, 7, { validation: true })).toMatchObject({
      kind: "artifact",
      components: ["model"],
      validation: "commit_after",
      reasons: ["validation"],
    });
  });
  it("the before-training pass of a fresh run is checkpoint-free even with save_checkpoint=true", () => {
    expect(
      planSave(cfg({ validation: { save_checkpoint: true } }), 0, { validation: true, initial: true }),
    ).toBeUndefined();
  });
});

describe("planSave: emergency saves", () => {
  it("emergency=full writes the full plan whatever the regular selection", () => {
    const plan = planSave(cfg({ save_every: 10, checkpoint_components: ["model"] }), 13, { emergency: true });
    expect(plan).toMatchObject({ kind: "full", components: FULL, reasons: ["emergency"] });
  });
  it("emergency=full is skipped when the step already has a full checkpoint", () => {
    expect(planSave(cfg({}), 13, { emergency: true }, { full: true })).toBeUndefined();
  });
  it("emergency=full is not skipped by a partial artifact of the step", () => {
    expect(planSave(cfg({}), 13, { emergency: true }, { full: false, artifact: ["model"] })).toMatchObject({
      kind: "full",
    });
  });
  it("emergency=run writes the run plan plus model through the cadence path", () => {
    const config = cfg({ checkpoint_components: ["training_state"], emergency_checkpoint_components: "run" });
    expect(planSave(config, 13, { emergency: true })).toMatchObject({
      kind: "artifact",
      components: ["model", "training_state"],
      reasons: ["emergency"],
    });
  });
  it("emergency=run with a model-only run plan writes the model (the two coincide)", () => {
    const config = cfg({ checkpoint_components: ["model"], emergency_checkpoint_components: "run" });
    expect(planSave(config, 13, { emergency: true })).toMatchObject({ components: ["model"] });
  });
  it("emergency=run with the full run plan writes a full checkpoint", () => {
    expect(planSave(cfg({ emergency_checkpoint_components: "run" }), 13, { emergency: true })).toMatchObject({
      kind: "full",
    });
  });
  it("coverage skip rule: skipped only when every component of the run plan is on disk for the step", () => {
    const config = cfg({
      checkpoint_components: ["model", "training_state"],
      emergency_checkpoint_components: "run",
    });
    expect(
      planSave(config, 13, { emergency: true }, { full: false, artifact: ["model", "training_state"] }),
    ).toBeUndefined();
    expect(planSave(config, 13, { emergency: true }, { full: true })).toBeUndefined();
  });
  it("coverage skip rule: a validation-only artifact without every run-plan component does not count", () => {
    const config = cfg({
      checkpoint_components: ["model", "training_state"],
      emergency_checkpoint_components: "run",
    });
    const plan = planSave(config, 13, { emergency: true }, { full: false, artifact: ["model"] });
    // A committed artifact is never re-committed: the logged fallback is the full plan.
    expect(plan).toMatchObject({ kind: "full", components: FULL, escalated: true });
  });
  it("a termination observed before a due validation writes a full pending checkpoint, whatever the plans", () => {
    const config = cfg({ checkpoint_components: ["model"], emergency_checkpoint_components: "run" });
    expect(planSave(config, 13, { emergency: true, validation: true })).toMatchObject({
      kind: "full",
      validation: "pending",
      reasons: ["validation", "emergency"],
    });
  });
  it("a termination during the before-training pass of a fresh run exits without saving", () => {
    expect(planSave(cfg({}), 0, { emergency: true, validation: true, initial: true })).toBeUndefined();
  });
  it("emergency saves stay active under save_every=0", () => {
    expect(planSave(cfg({ save_every: 0 }), 3, { emergency: true })).toMatchObject({ kind: "full" });
  });
  it("an emergency at a cadence step unions with the due regular save", () => {
    const config = cfg({
      save_every: 10,
      checkpoint_components: ["training_state"],
      emergency_checkpoint_components: "run",
    });
    expect(planSave(config, 10, { emergency: true, cadence: true })).toMatchObject({
      components: ["model", "training_state"],
      reasons: ["cadence", "emergency"],
    });
  });
});

describe("cadenceDue", () => {
  it("is a positive multiple of save_every, never with save_every=0", () => {
    expect(cadenceDue({ save_every: 10 }, 20)).toBe(true);
    expect(cadenceDue({ save_every: 10 }, 25)).toBe(false);
    expect(cadenceDue({ save_every: 10 }, 0)).toBe(false);
    expect(cadenceDue({ save_every: 0 }, 20)).toBe(false);
  });
});
