import { describe, expect, it } from "vitest";
import { ManagerError, parseManagerConfig } from "../src/index.js";

const direct = {
  checkpoint_format: "dcp",
  checkpoint_store: { backend: "object_store", bucket: "experiments" },
};

function refusal(raw: unknown): ManagerError {
  try {
    parseManagerConfig(raw);
  } catch (error) {
    expect(error).toBeInstanceOf(ManagerError);
    return error as ManagerError;
  }
  throw new Error(`expected ${JSON.stringify(raw)} to be refused`);
}

describe("parseManagerConfig: defaults (seed 001 knob table)", () => {
  it("fills every knob with the table's default", () => {
    const { config, warnings } = parseManagerConfig({});
    expect(config).toEqual({
      save_every: 0,
      resume: "auto",
      resume_sha256: null,
      data: { cursor_resume: "auto" },
      run_ts: "",
      checkpoint_format: "consolidated",
      checkpoint_components: ["model", "optimizer", "training_state"],
      emergency_checkpoint_components: "full",
      checkpoint_store: { backend: "local", bucket: "", credentials: "", prefix: "", lease_seconds: 600 },
      save_async: true,
      keep_optim_last: 1,
      keep_model_last: 0,
      upload: { enabled: false, bucket: "", credentials: "", prefix: "" },
      validation: { save_checkpoint: false, checkpoint_components: ["model", "optimizer", "training_state"] },
      roles: [],
    });
    expect(warnings).toEqual([]);
  });

  it('resume "" means off', () => {
    expect(parseManagerConfig({ resume: "" }).config.resume).toBe("off");
  });

  it("keeps an explicit resume path as given", () => {
    expect(parseManagerConfig({ resume: "/runs/a/checkpoints/iter_000000100" }).config.resume).toBe(
      "/runs/a/checkpoints/iter_000000100",
    );
  });
});

describe("parseManagerConfig: keep_optim_last null is backend-aware", () => {
  it("resolves to 1 for a local primary", () => {
    expect(parseManagerConfig({ keep_optim_last: null }).config.keep_optim_last).toBe(1);
  });
  it("resolves to 0 for a direct object-store primary", () => {
    expect(parseManagerConfig(direct).config.keep_optim_last).toBe(0);
  });
  it("keeps an explicit 0 (keep all) and an explicit count locally", () => {
    expect(parseManagerConfig({ keep_optim_last: 0 }).config.keep_optim_last).toBe(0);
    expect(parseManagerConfig({ keep_optim_last: 3 }).config.keep_optim_last).toBe(3);
  });
});

describe("parseManagerConfig: direct object-store primary rules", () => {
  it("needs checkpoint_format=dcp", () => {
    const error = refusal({ ...direct, checkpoint_format: "consolidated" });
    expect(error).toMatchObject({
      code: "MANAGER_CONFIG_CONFLICT",
      knob: "checkpoint_format",
      kind: "input",
    });
  });
  it("refuses upload.enabled=true", () => {
    const error = refusal({ ...direct, upload: { enabled: true, bucket: "b" } });
    expect(error).toMatchObject({ code: "MANAGER_CONFIG_CONFLICT", knob: "upload.enabled" });
  });
  it("refuses explicit non-zero keep_optim_last and keep_model_last, accepts 0", () => {
    expect(refusal({ ...direct, keep_optim_last: 2 })).toMatchObject({ knob: "keep_optim_last" });
    expect(refusal({ ...direct, keep_model_last: 1 })).toMatchObject({ knob: "keep_model_last" });
    expect(
      parseManagerConfig({ ...direct, keep_optim_last: 0, keep_model_last: 0 }).config.keep_model_last,
    ).toBe(0);
  });
  it("needs a bucket", () => {
    const error = refusal({ checkpoint_format: "dcp", checkpoint_store: { backend: "object_store" } });
    expect(error).toMatchObject({ code: "MANAGER_CONFIG_INVALID", knob: "checkpoint_store.bucket" });
  });
  it("refuses a prefix naming one iteration (the prefix names the checkpoint root)", () => {
    const error = refusal({
      ...direct,
      checkpoint_store: { ...direct.checkpoint_store, prefix: "a/checkpoints/iter_000000100" },
    });
    expect(error).toMatchObject({ knob: "checkpoint_store.prefix" });
  });
  it("a multi-role boundary needs the local primary", () => {
    expect(refusal({ ...direct, roles: ["policy", "critic"] })).toMatchObject({ knob: "roles" });
  });
  it("with a partial plan active, the prefix must end in /checkpoints (artifacts go to its sibling)", () => {
    const raw = {
      ...direct,
      save_every: 10,
      checkpoint_components: ["model"],
      checkpoint_store: { ...direct.checkpoint_store, prefix: "proj/run" },
    };
    expect(refusal(raw)).toMatchObject({ knob: "checkpoint_store.prefix" });
    const ok = { ...raw, checkpoint_store: { ...raw.checkpoint_store, prefix: "proj/run/checkpoints" } };
    expect(parseManagerConfig(ok).config.checkpoint_store.prefix).toBe("proj/run/checkpoints");
  });
  it("an s3:// resume needs the direct primary", () => {
    expect(refusal({ resume: "s3://b/p/checkpoints/iter_000000100" })).toMatchObject({ knob: "resume" });
    expect(
      parseManagerConfig({ ...direct, resume: "s3://b/p/checkpoints/iter_000000100" }).config.resume,
    ).toBe("s3://b/p/checkpoints/iter_000000100");
  });
});

describe("parseManagerConfig: component lists", () => {
  for (const knob of ["checkpoint_components", "validation.checkpoint_components"] as const) {
    const wrap = (value: unknown) =>
      knob === "checkpoint_components"
        ? { checkpoint_components: value }
        : { validation: { checkpoint_components: value } };
    it(`${knob}: an empty list is refused`, () => {
      expect(refusal(wrap([]))).toMatchObject({ code: "MANAGER_CONFIG_INVALID", knob });
    });
    it(`${knob}: a duplicated name is refused, optim being optimizer`, () => {
      expect(refusal(wrap(["model", "model"])).message).toContain("twice");
      expect(refusal(wrap(["optimizer", "optim"])).message).toContain("twice");
    });
    it(`${knob}: a non-string name is refused`, () => {
      expect(refusal(wrap(["model", 3])).message).toContain("not a string");
    });
    it(`${knob}: an unknown name is refused`, () => {
      expect(refusal(wrap(["weights"])).message).toContain("unknown component");
    });
    it(`${knob}: a non-list is refused`, () => {
      expect(refusal(wrap("model"))).toMatchObject({ knob });
    });
  }

  it("partial plans are canonicalised into the table order", () => {
    const { config } = parseManagerConfig({
      checkpoint_components: ["training_state", "model"],
      validation: { checkpoint_components: ["optim", "model"] },
    });
    expect(config.checkpoint_components).toEqual(["model", "training_state"]);
    // optim, the optimizer's file name, is read as the logical optimizer.
    expect(config.validation.checkpoint_components).toEqual(["model", "optimizer"]);
  });

  it("an active regular partial plan warns; an inactive one (save_every=0, emergency full) does not", () => {
    expect(parseManagerConfig({ save_every: 10, checkpoint_components: ["model"] }).warnings).toHaveLength(1);
    expect(parseManagerConfig({ save_every: 0, checkpoint_components: ["model"] }).warnings).toEqual([]);
  });

  it("a regular partial plan used by emergency=run is active and warns", () => {
    const { warnings } = parseManagerConfig({
      save_every: 0,
      checkpoint_components: ["model"],
      emergency_checkpoint_components: "run",
    });
    expect(warnings).toHaveLength(1);
  });

  it("an inactive validation plan does not warn; an active one does", () => {
    expect(parseManagerConfig({ validation: { checkpoint_components: ["model"] } }).warnings).toEqual([]);
    const active = parseManagerConfig({
      validation: { save_checkpoint: true, checkpoint_components: ["model"] },
    });
    expect(active.warnings).toHaveLength(1);
    expect(active.warnings[0]).toContain("validation.checkpoint_components");
  });
});

describe("parseManagerConfig: emergency=run coverage rule", () => {
  it("refuses run with a saving validation plan [model] under a run plan [model, training_state]", () => {
    const error = refusal({
      emergency_checkpoint_components: "run",
      checkpoint_components: ["model", "training_state"],
      validation: { save_checkpoint: true, checkpoint_components: ["model"] },
    });
    expect(error).toMatchObject({ code: "MANAGER_CONFIG_CONFLICT", knob: "emergency_checkpoint_components" });
    expect(error.message).toContain("training_state");
  });
  it("refuses run with a saving validation plan lacking the model the emergency save always carries", () => {
    const error = refusal({
      emergency_checkpoint_components: "run",
      checkpoint_components: ["optimizer"],
      validation: { save_checkpoint: true, checkpoint_components: ["optimizer"] },
    });
    expect(error.message).toContain("missing model");
  });
  it("accepts run when the saving validation plan covers the run plan plus model", () => {
    const { config } = parseManagerConfig({
      emergency_checkpoint_components: "run",
      checkpoint_components: ["model"],
      validation: { save_checkpoint: true, checkpoint_components: ["model", "training_state"] },
    });
    expect(config.emergency_checkpoint_components).toBe("run");
  });
  it("accepts run with a non-saving validation plan whatever it holds", () => {
    const { config } = parseManagerConfig({
      emergency_checkpoint_components: "run",
      checkpoint_components: ["model", "training_state"],
      validation: { save_checkpoint: false, checkpoint_components: ["model"] },
    });
    expect(config.validation.save_checkpoint).toBe(false);
  });
});

describe("parseManagerConfig: multi-role boundary (PPO) rules", () => {
  it("refuses emergency_checkpoint_components=run (the PPO loops always write the full plan)", () => {
    const error = refusal({ roles: ["policy", "critic"], emergency_checkpoint_components: "run" });
    expect(error).toMatchObject({ knob: "emergency_checkpoint_components" });
  });
  it("refuses a partial regular plan", () => {
    expect(refusal({ roles: ["policy", "critic"], checkpoint_components: ["model"] })).toMatchObject({
      knob: "checkpoint_components",
    });
  });
  it("refuses bad or duplicated role names", () => {
    expect(refusal({ roles: ["Policy"] })).toMatchObject({ knob: "roles" });
    expect(refusal({ roles: ["policy", "policy"] })).toMatchObject({ knob: "roles" });
  });
});

describe("parseManagerConfig: shape errors name the knob", () => {
  it("an unknown knob", () => {
    const error = refusal({ save_evry: 10 });
    expect(error).toMatchObject({ code: "MANAGER_CONFIG_INVALID", knob: "save_evry" });
  });
  it("an unknown nested knob", () => {
    expect(refusal({ upload: { enabled: true, bucket: "b", endpoint: "x" } })).toMatchObject({
      knob: "upload.endpoint",
    });
  });
  it("a negative save_every", () => {
    expect(refusal({ save_every: -1 })).toMatchObject({ knob: "save_every" });
  });
  it("a bad checkpoint_format", () => {
    const error = refusal({ checkpoint_format: "safetensors" });
    expect(error).toMatchObject({ knob: "checkpoint_format" });
    expect(error.message).toContain('"consolidated", "dcp"');
  });
  it("a bad run_ts", () => {
    expect(refusal({ run_ts: "2026-09-01" })).toMatchObject({ knob: "run_ts" });
  });
  it("upload.enabled without a bucket", () => {
    expect(refusal({ upload: { enabled: true } })).toMatchObject({ knob: "upload.bucket" });
  });
  it("an upload prefix that is not a checkpoints root", () => {
    expect(refusal({ upload: { enabled: true, bucket: "b", prefix: "proj/run" } })).toMatchObject({
      knob: "upload.prefix",
    });
  });
  it("a malformed resume_sha256, and a pin without an explicit resume", () => {
    expect(refusal({ resume: "/x/iter_000000001", resume_sha256: "abc" })).toMatchObject({
      knob: "resume_sha256",
    });
    expect(refusal({ resume_sha256: "a".repeat(64) })).toMatchObject({
      code: "MANAGER_CONFIG_CONFLICT",
      knob: "resume_sha256",
    });
  });
  it("a bad data.cursor_resume", () => {
    expect(refusal({ data: { cursor_resume: "maybe" } })).toMatchObject({ knob: "data.cursor_resume" });
  });
  it("a non-object config", () => {
    expect(refusal(42)).toMatchObject({ code: "MANAGER_CONFIG_INVALID" });
  });
});
