import type { ArtifactManifest, FileDigest, MergeComplete } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import {
  checkIntact,
  classifyOutput,
  compareRequests,
  decideMerge,
  type ManifestRead,
  MERGE_MODEL_FILE,
  MERGE_TOOL_VERSION,
  type OutputFacts,
  type OutputState,
  type RequestedIdentity,
} from "../src/index.js";

const sha = (c: string) => c.repeat(64);
const record: MergeComplete = {
  schema: "posttrain.merge-complete.v1",
  tool_version: MERGE_TOOL_VERSION,
  request: {
    mode: "tv",
    experts: [
      { source: "/e/a.pt", size: 10, sha256: sha("a") },
      { source: "/e/b.pt", size: 11, sha256: sha("b") },
    ],
    base: { source: "/base", fingerprint: sha("c") },
    lam: 0.5,
    iteration: 300,
  },
  files: [
    { path: ".posttrain-checkpoint-artifact.json", size: 300, sha256: sha("d") },
    { path: "model.pt", size: 1000, sha256: sha("e") },
  ],
  diagnostics: { location: "artifact", path: "merge-diagnostics.json", size: 50, sha256: sha("f") },
};
const manifest: ArtifactManifest = {
  schema: "posttrain.checkpoint-artifact.v1",
  iteration: 300,
  format: "consolidated",
  logical_components: ["model"],
  physical_components: [{ name: "model", kind: "file", path: "model.pt", size: 1000, sha256: sha("e") }],
  producer: MERGE_TOOL_VERSION,
};
const okManifest: ManifestRead = { status: "ok", value: manifest };
const facts = (over: Partial<OutputFacts>): OutputFacts => ({
  exists: true,
  entries: [
    ".merge-complete.json",
    ".posttrain-checkpoint-artifact.json",
    "merge-diagnostics.json",
    "model.pt",
  ],
  completion: { status: "ok", value: record },
  manifest: okManifest,
  ...over,
});
const classify = (over: Partial<OutputFacts>) =>
  classifyOutput(facts(over), MERGE_TOOL_VERSION, MERGE_MODEL_FILE);

describe("classifyOutput", () => {
  it("no directory, or an empty one, is absent", () => {
    const none = {
      exists: false,
      entries: [],
      completion: { status: "absent" },
      manifest: { status: "absent" },
    } as const;
    expect(classify(none).kind).toBe("absent");
    expect(classify({ ...none, exists: true }).kind).toBe("absent");
  });

  it("a completion record of this version is completed (still to be checked intact)", () => {
    expect(classify({})).toEqual({ kind: "completed", record });
  });

  it("a completion record of another tool version is other-tool", () => {
    const old = { ...record, tool_version: "merge_model_pt/1" };
    expect(classify({ completion: { status: "ok", value: old } })).toEqual({
      kind: "other-tool",
      version: "merge_model_pt/1",
    });
  });

  it("an unrecognised completion record (JSON of another schema) is other-tool, not damage", () => {
    expect(classify({ completion: { status: "unrecognised", label: "merge_model_pt" } }).kind).toBe(
      "other-tool",
    );
  });

  it("the retired tool's legacy manifest under the native name is other-tool", () => {
    expect(
      classify({
        completion: { status: "absent" },
        manifest: { status: "legacy-merge", tool: "merge_model_pt" },
      }),
    ).toEqual({ kind: "other-tool", version: "merge_model_pt (retired)" });
  });

  it("a committed artifact of another producer without a completion record is foreign-artifact", () => {
    const trainer = { status: "ok", value: { ...manifest, producer: "ckpt-trainer/0.1.0" } } as const;
    expect(classify({ completion: { status: "absent" }, manifest: trainer })).toEqual({
      kind: "foreign-artifact",
      producer: "ckpt-trainer/0.1.0",
    });
    const unnamed = { status: "ok", value: { ...manifest, producer: undefined } } as const;
    expect(classify({ completion: { status: "absent" }, manifest: unnamed }).kind).toBe("foreign-artifact");
  });

  it("a merge's manifest without its completion record is incomplete", () => {
    expect(classify({ completion: { status: "absent" } })).toEqual({
      kind: "incomplete",
      reason: "it has no completion record",
    });
  });

  it("an unreadable (non-JSON) completion record is incomplete", () => {
    expect(
      classify({ completion: { status: "invalid", code: "JSON_TRUNCATED", message: "x" } }),
    ).toMatchObject({
      kind: "incomplete",
      reason: expect.stringContaining("JSON_TRUNCATED"),
    });
  });

  it("a directory with files but no model and no records is incomplete", () => {
    expect(
      classify({
        entries: ["merge-diagnostics.json"],
        completion: { status: "absent" },
        manifest: { status: "absent" },
      }),
    ).toEqual({ kind: "incomplete", reason: "it holds no model" });
  });
});

describe("checkIntact", () => {
  const actual = (over: Record<string, FileDigest | undefined> = {}) =>
    new Map<string, FileDigest | undefined>(
      Object.entries({
        ".posttrain-checkpoint-artifact.json": { size: 300, sha256: sha("d") },
        "model.pt": { size: 1000, sha256: sha("e") },
        "merge-diagnostics.json": { size: 50, sha256: sha("f") },
        ...over,
      }),
    );

  it("finds nothing wrong with matching files", () => {
    expect(checkIntact(record, actual(), okManifest, MERGE_MODEL_FILE)).toEqual([]);
  });

  it("reports a missing or changed model, and a changed diagnostics file", () => {
    expect(checkIntact(record, actual({ "model.pt": undefined }), okManifest, MERGE_MODEL_FILE)).toEqual([
      "model.pt is missing",
    ]);
    expect(
      checkIntact(
        record,
        actual({ "model.pt": { size: 1000, sha256: sha("0") } }),
        okManifest,
        MERGE_MODEL_FILE,
      )[0],
    ).toContain("model.pt has changed");
    expect(
      checkIntact(
        record,
        actual({ "merge-diagnostics.json": { size: 51, sha256: sha("f") } }),
        okManifest,
        MERGE_MODEL_FILE,
      ),
    ).toHaveLength(1);
  });

  it("reports a native manifest that is unreadable or describes another model", () => {
    expect(checkIntact(record, actual(), { status: "absent" }, MERGE_MODEL_FILE)).toEqual([
      "the native manifest is absent",
    ]);
    const other = {
      ...manifest,
      physical_components: [{ ...manifest.physical_components[0]!, sha256: sha("9") }],
    };
    expect(
      checkIntact(record, actual(), { status: "ok", value: other as ArtifactManifest }, MERGE_MODEL_FILE),
    ).toEqual(["the native manifest does not describe the recorded model"]);
  });
});

describe("compareRequests", () => {
  const same: RequestedIdentity = {
    request: {
      ...record.request,
      experts: record.request.experts.map((e) => ({ ...e, source: `/elsewhere${e.source}` })),
    },
    diagnostics: { location: "artifact", path: "merge-diagnostics.json" },
  };

  it("finds no difference for the same bytes at other paths", () => {
    expect(compareRequests(record, same)).toEqual([]);
  });

  it("treats expert order as identity", () => {
    const swapped = { ...same, request: { ...same.request, experts: [...same.request.experts].reverse() } };
    expect(compareRequests(record, swapped)).toEqual(["experts[0]", "experts[1]"]);
  });

  it("names each differing field", () => {
    const other: RequestedIdentity = {
      request: {
        ...same.request,
        mode: "avg",
        lam: null,
        iteration: 301,
        base: null,
        experts: same.request.experts.slice(0, 1),
      },
      diagnostics: { location: "external", path: "/tmp/d.json" },
    };
    expect(compareRequests(record, other)).toEqual([
      "mode",
      "lam",
      "iteration",
      "base",
      "experts (count)",
      "diagnostics",
    ]);
    const base = { ...same, request: { ...same.request, base: { source: "/base", fingerprint: sha("1") } } };
    expect(compareRequests(record, base)).toEqual(["base"]);
  });

  it("compares only sizes and the base's presence while digests are unknown", () => {
    const cheap: RequestedIdentity = {
      ...same,
      request: {
        ...same.request,
        experts: same.request.experts.map(({ source, size }) => ({ source, size })),
        base: { source: "/base" },
      },
    };
    expect(compareRequests(record, cheap)).toEqual([]);
    const sizes = {
      ...cheap,
      request: {
        ...cheap.request,
        experts: [
          { source: "x", size: 10 },
          { source: "y", size: 12 },
        ],
      },
    };
    expect(compareRequests(record, sizes)).toEqual(["experts[1]"]);
  });
});

describe("decideMerge", () => {
  const decide = (
    state: OutputState,
    over: { force?: boolean; differences?: string[]; foreign?: string[] } = {},
  ) =>
    decideMerge({
      iterDir: "/run/checkpoint_artifacts/iter_000000300",
      state,
      differences: over.differences,
      force: over.force ?? false,
      toolVersion: MERGE_TOOL_VERSION,
      foreignEntries: over.foreign ?? [],
    });
  const completed: OutputState = { kind: "completed", record };

  it("builds when there is no output", () => {
    expect(decide({ kind: "absent" }).action).toBe("build");
  });

  it("rebuilds an incomplete output without --force", () => {
    expect(decide({ kind: "incomplete", reason: "it has no completion record" })).toMatchObject({
      action: "build",
      reason: expect.stringContaining("incomplete"),
    });
  });

  it("rebuilds a damaged output without --force", () => {
    expect(decide({ kind: "damaged", problems: ["model.pt is missing"] })).toMatchObject({
      action: "build",
      reason: expect.stringContaining("model.pt is missing"),
    });
  });

  it("skips the same request on an intact completed output", () => {
    expect(decide(completed, { differences: [] }).action).toBe("skip");
  });

  it("rebuilds the same request under --force", () => {
    expect(decide(completed, { differences: [], force: true }).action).toBe("build");
  });

  it("refuses a completed different request, naming the differences and the remedy", () => {
    const d = decide(completed, { differences: ["lam", "experts[1]"] });
    expect(d.action).toBe("refuse");
    if (d.action !== "refuse") return;
    expect(d.error).toMatchObject({
      code: "MERGE_DIFFERENT_REQUEST",
      kind: "refused",
      file: "/run/checkpoint_artifacts/iter_000000300",
    });
    expect(d.error.message).toMatch(/differs in lam, experts\[1\].*--force/);
  });

  it("replaces a completed different request under --force", () => {
    expect(decide(completed, { differences: ["lam"], force: true }).action).toBe("build");
  });

  it("refuses an older tool version's output unless --force", () => {
    const old: OutputState = { kind: "other-tool", version: "merge_model_pt/1" };
    const d = decide(old);
    expect(d.action === "refuse" && d.error.code).toBe("MERGE_OTHER_TOOL_VERSION");
    expect(decide(old, { force: true }).action).toBe("build");
  });

  it("refuses another writer's committed artifact unless --force", () => {
    const trainer: OutputState = { kind: "foreign-artifact", producer: "ckpt-trainer/0.1.0" };
    const d = decide(trainer);
    expect(d.action === "refuse" && d.error.code).toBe("MERGE_FOREIGN_ARTIFACT");
    expect(decide(trainer, { force: true }).action).toBe("build");
  });

  it("never builds over files a merge did not write, even under --force", () => {
    for (const state of [{ kind: "absent" } as const, completed]) {
      const d = decide(state, { force: true, differences: [], foreign: [".uploaded", "notes.txt"] });
      expect(d.action === "refuse" && d.error.code).toBe("MERGE_FOREIGN_FILES");
      if (d.action === "refuse") expect(d.error.message).toContain(".uploaded, notes.txt");
    }
  });

  it("still skips an identical completed output beside other files (a skip writes nothing)", () => {
    expect(decide(completed, { differences: [], foreign: [".uploaded"] }).action).toBe("skip");
  });
});
