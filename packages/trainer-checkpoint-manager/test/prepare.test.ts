// decideLeftovers: what a local save may clear before writing, decided from what was observed at
// its iteration directory (no filesystem). The executor's end-to-end cases are in manager.local.test.ts.
import { describe, expect, it } from "vitest";
import type { ManagerError } from "../src/index.js";
import { decideLeftovers, type LeftoverObservation } from "../src/local/prepare.js";

const full: LeftoverObservation = {
  kind: "full",
  step: 20,
  dir: "/a/checkpoints/iter_000000020",
  layout: "run_ts",
  occupied: true,
};
const artifact: LeftoverObservation = {
  kind: "artifact",
  step: 15,
  dir: "/a/checkpoint_artifacts/iter_000000015",
  layout: "run_ts",
  occupied: true,
};

function refusal(seen: LeftoverObservation): ManagerError {
  try {
    decideLeftovers(seen);
  } catch (error) {
    return error as ManagerError;
  }
  throw new Error("expected a refusal");
}

describe("decideLeftovers: a full save", () => {
  it("clears nothing at an empty iteration directory", () => {
    expect(decideLeftovers({ ...full, occupied: false, latest: 30 })).toBe("nothing");
  });

  it("clears the whole directory past the pointer (an interrupted save), or with no pointer", () => {
    expect(decideLeftovers({ ...full, latest: 10 })).toBe("directory");
    expect(decideLeftovers({ ...full, latest: undefined })).toBe("directory");
  });

  it("refuses a directory at or behind the pointer: committed history is never rewritten", () => {
    for (const latest of [20, 30]) {
      const error = refusal({ ...full, latest });
      expect([error.code, error.kind, error.subject]).toEqual([
        "MANAGER_CHECKPOINT_EXISTS",
        "refused",
        full.dir,
      ]);
      expect(error.message).toContain("set resume=off for a fresh attempt");
    }
  });

  it("names the legacy flat layout's way out", () => {
    const error = refusal({ ...full, layout: "legacy", latest: 20 });
    expect(error.message).toContain("legacy flat layout");
    expect(error.message).toContain("set run_ts");
  });
});

describe("decideLeftovers: an artifact save", () => {
  it("clears only the component payloads of an uncommitted artifact", () => {
    expect(decideLeftovers({ ...artifact, artifactCommitted: false })).toBe("payloads");
    expect(decideLeftovers({ ...artifact, occupied: false })).toBe("nothing");
  });

  it("refuses a committed artifact, naming its manifest", () => {
    const error = refusal({ ...artifact, artifactCommitted: true });
    expect([error.code, error.kind]).toEqual(["MANAGER_ARTIFACT_COMMITTED", "refused"]);
    expect(error.subject).toBe(`${artifact.dir}/.posttrain-checkpoint-artifact.json`);
  });
});
