import { describe, expect, it } from "vitest";
import {
  type AttemptInputs,
  decideAttempt,
  defaultPrefixFor,
  refuseLegacyFresh,
  targetsFor,
} from "../src/index.js";

const base: AttemptInputs = {
  outputRoot: "/out",
  project: "proj",
  group: "grp",
  name: "run",
  configRunTs: "",
  resume: "auto",
  rank: 0,
  existingRunTs: [],
  legacyFlat: false,
  now: new Date(Date.UTC(2026, 8, 1, 12, 0, 0)),
};

describe("decideAttempt (seed 001 Layout: RUN_TS minted at the first launch, reused afterwards)", () => {
  it("the first launch mints RUN_TS from the clock", () => {
    expect(decideAttempt(base)).toEqual({
      layout: "run_ts",
      runTs: "20260901120000",
      attemptDir: "/out/proj/grp/run/20260901120000",
      how: "minted",
    });
  });
  it("a resumed window (resume=auto) adopts the newest existing attempt", () => {
    const d = decideAttempt({ ...base, existingRunTs: ["20260801000000", "20260815000000", "notts"] });
    expect(d).toMatchObject({ runTs: "20260815000000", how: "adopted" });
  });
  it("an explicit resume path also adopts the newest attempt", () => {
    const d = decideAttempt({ ...base, resume: "/x/iter_000000010", existingRunTs: ["20260815000000"] });
    expect(d.how).toBe("adopted");
  });
  it("resume=off mints a sibling attempt; nothing is overwritten", () => {
    const d = decideAttempt({ ...base, resume: "off", existingRunTs: ["20260801000000"] });
    expect(d).toMatchObject({ runTs: "20260901120000", how: "minted" });
  });
  it("resume=off mints later than every existing attempt even when the clock is behind or equal", () => {
    const d = decideAttempt({ ...base, resume: "off", existingRunTs: ["20260901120000", "20260901120005"] });
    expect(d.runTs).toBe("20260901120006");
  });
  it("a run_ts from the config or the caller is used as it is", () => {
    expect(decideAttempt({ ...base, configRunTs: "20250101000000" })).toMatchObject({
      runTs: "20250101000000",
      how: "given",
    });
    expect(
      decideAttempt({ ...base, givenRunTs: "20250101000000", existingRunTs: ["20260101000000"] }),
    ).toMatchObject({
      runTs: "20250101000000",
      how: "given",
    });
  });
  it("refuses a caller run_ts that contradicts the config's", () => {
    expect(() =>
      decideAttempt({ ...base, configRunTs: "20250101000000", givenRunTs: "20250101000001" }),
    ).toThrow(/differ/);
  });
  it("refuses an invalid given run_ts", () => {
    expect(() => decideAttempt({ ...base, givenRunTs: "20251301000000" })).toThrow(/not a YYYYmmddHHMMSS/);
  });
  it("only rank 0 mints: another rank without a RUN_TS is refused", () => {
    expect(() => decideAttempt({ ...base, rank: 1 })).toThrow(
      expect.objectContaining({ code: "MANAGER_RUN_TS_REQUIRED" }),
    );
  });
  it("legacy jobs whose <name>/checkpoints/ exists keep the flat layout (also under resume=off)", () => {
    for (const resume of ["auto", "off"]) {
      expect(decideAttempt({ ...base, resume, legacyFlat: true })).toEqual({
        layout: "legacy",
        runTs: "",
        attemptDir: "/out/proj/grp/run",
        how: "legacy",
      });
    }
  });
  it("the default store prefix mirrors the layout", () => {
    const run = { project: "proj", group: "grp", name: "run" };
    expect(defaultPrefixFor({ layout: "run_ts", runTs: "20260901120000" }, run)).toBe(
      "proj/grp/run/20260901120000/checkpoints",
    );
    expect(defaultPrefixFor({ layout: "legacy", runTs: "" }, run)).toBe("proj/grp/run/checkpoints");
  });
});

describe("targetsFor (every rank computes its targets without rank 0)", () => {
  const full = { kind: "full" as const, components: ["model", "optimizer", "training_state"] as const };
  it("consolidated full plan: one .pt per component under checkpoints/iter_*", () => {
    expect(targetsFor("/a", 100, full, "consolidated")).toEqual({
      dir: "/a/checkpoints/iter_000000100",
      targets: {
        model: "/a/checkpoints/iter_000000100/model.pt",
        optim: "/a/checkpoints/iter_000000100/optim.pt",
        trainer: "/a/checkpoints/iter_000000100/trainer.pt",
        data: "/a/checkpoints/iter_000000100/data.pt",
        old: "/a/checkpoints/iter_000000100/old.pt",
        ref: "/a/checkpoints/iter_000000100/ref.pt",
      },
    });
  });
  it("dcp: model/, optim/, old/, ref/ directories; trainer.pt and data.pt stay files", () => {
    const { targets } = targetsFor("/a", 5, full, "dcp");
    expect(targets).toEqual({
      model: "/a/checkpoints/iter_000000005/model/",
      optim: "/a/checkpoints/iter_000000005/optim/",
      trainer: "/a/checkpoints/iter_000000005/trainer.pt",
      data: "/a/checkpoints/iter_000000005/data.pt",
      old: "/a/checkpoints/iter_000000005/old/",
      ref: "/a/checkpoints/iter_000000005/ref/",
    });
  });
  it("a partial plan targets only its components, under checkpoint_artifacts/iter_*", () => {
    expect(targetsFor("/a", 300, { kind: "artifact", components: ["model"] }, "consolidated")).toEqual({
      dir: "/a/checkpoint_artifacts/iter_000000300",
      targets: { model: "/a/checkpoint_artifacts/iter_000000300/model.pt" },
    });
  });
  it("a multi-role boundary targets <iter>/<role>/ per role", () => {
    const t = targetsFor("/a", 12, full, "consolidated", { roles: ["policy", "critic"] });
    expect(t.targets).toEqual({});
    expect(t.roles?.policy?.model).toBe("/a/checkpoints/iter_000000012/policy/model.pt");
    expect(t.roles?.critic?.optim).toBe("/a/checkpoints/iter_000000012/critic/optim.pt");
  });
  it("direct primary: DCP components in place at the store URI, small files staged locally", () => {
    const t = targetsFor("/a", 100, full, "dcp", {
      remote: { checkpointsUri: "s3://b/p/checkpoints/", stagingDir: "/a/.ckpt-staging" },
    });
    expect(t.dir).toBe("s3://b/p/checkpoints/iter_000000100");
    expect(t.targets.model).toBe("s3://b/p/checkpoints/iter_000000100/model/");
    expect(t.targets.trainer).toBe("/a/.ckpt-staging/checkpoints/iter_000000100/trainer.pt");
    const art = targetsFor("/a", 100, { kind: "artifact", components: ["model"] }, "dcp", {
      remote: { checkpointsUri: "s3://b/p/checkpoints", stagingDir: "/a/.ckpt-staging" },
    });
    expect(art.targets.model).toBe("s3://b/p/checkpoint_artifacts/iter_000000100/model/");
  });
});

describe("refuseLegacyFresh (seed 001 Resume: resume=off on a legacy flat layout gets no sibling attempt)", () => {
  const legacy = { layout: "legacy" as const, attemptDir: "/out/proj/grp/run" };
  it("a legacy flat layout holding checkpoints refuses resume=off, naming the knob and the remedies", () => {
    for (const existing of [
      { latest: 20, iterDirs: ["iter_000000010", "iter_000000020"] },
      { latest: undefined, iterDirs: ["iter_000000010"] },
    ]) {
      let thrown: unknown;
      try {
        refuseLegacyFresh(legacy, "off", existing);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toMatchObject({
        code: "MANAGER_LEGACY_FRESH_REFUSED",
        knob: "resume",
        subject: "/out/proj/grp/run/checkpoints",
      });
      expect((thrown as Error).message).toMatch(/resume=auto.*run_ts/);
    }
  });
  it("an empty legacy layout, another resume setting, or the RUN_TS layout are not refused", () => {
    expect(() => refuseLegacyFresh(legacy, "off", { latest: undefined, iterDirs: [] })).not.toThrow();
    expect(() =>
      refuseLegacyFresh(legacy, "auto", { latest: 20, iterDirs: ["iter_000000020"] }),
    ).not.toThrow();
    expect(() =>
      refuseLegacyFresh({ layout: "run_ts", attemptDir: "/x" }, "off", { latest: 20, iterDirs: [] }),
    ).not.toThrow();
  });
});
