import {
  ARTIFACT_MANIFEST_FILE,
  type ArtifactManifest,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  MERGE_COMPLETE_FILE,
  type MergeComplete,
} from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import { type LocalArtifact, planPublish, selectArchiveFiles } from "../src/index.js";

const sha = (c: string) => c.repeat(64);
const manifest: ArtifactManifest = {
  schema: "posttrain.checkpoint-artifact.v1",
  iteration: 3,
  format: "dcp",
  logical_components: ["model"],
  physical_components: [
    {
      name: "model",
      kind: "dir",
      path: "model",
      files: [
        { path: ".metadata", size: 1, sha256: sha("a") },
        { path: "__0_0.distcp", size: 2 },
      ],
    },
  ],
};
const destination = { scheme: "memory", endpoint: "m", bucket: "m", prefix: "p" } as const;
const enc = (s: string) => new TextEncoder().encode(s);
const local: LocalArtifact = {
  dir: "/x/iter_3",
  iteration: 3,
  manifest,
  manifestBytes: enc("manifest"),
  manifestRewrite: false,
  files: [
    { path: ARTIFACT_MANIFEST_FILE, size: 8, sha256: sha("1") },
    { path: "model/.metadata", size: 1, sha256: sha("a") },
    { path: "model/__0_0.distcp", size: 2, sha256: sha("b") },
  ],
  declarationBytes: enc("declaration"),
};

describe("selectArchiveFiles (pure)", () => {
  it("selects payloads, the manifest and only the records that exist", () => {
    expect(selectArchiveFiles(manifest, { legacyManifest: false }).map((f) => [f.path, f.role])).toEqual([
      [ARTIFACT_MANIFEST_FILE, "manifest"],
      ["model/.metadata", "payload"],
      ["model/__0_0.distcp", "payload"],
    ]);
    const merge = {
      diagnostics: { location: "artifact", path: "diag/d.json", size: 5, sha256: sha("d") },
    } as unknown as MergeComplete;
    expect(
      selectArchiveFiles(manifest, { legacyManifest: true, mergeComplete: merge }).map((f) => f.path),
    ).toEqual([
      MERGE_COMPLETE_FILE,
      ARTIFACT_MANIFEST_FILE,
      LEGACY_ARTIFACT_MANIFEST_FILE,
      "diag/d.json",
      "model/.metadata",
      "model/__0_0.distcp",
    ]);
    const external = {
      diagnostics: { location: "external", source: "/elsewhere" },
    } as unknown as MergeComplete;
    expect(
      selectArchiveFiles(manifest, { legacyManifest: false, mergeComplete: external }).map((f) => f.path),
    ).not.toContain("/elsewhere");
  });
});

describe("planPublish (pure)", () => {
  it("publishes everything to an empty destination, declaration first", () => {
    expect(planPublish(local, { objects: new Map() }, destination)).toEqual({
      action: "publish",
      createDeclaration: true,
      upload: local.files.slice(1),
      present: [],
    });
  });

  it("resumes under its own declaration, skipping payloads present with size and digest", () => {
    const objects = new Map([
      ["model/.metadata", { size: 1, sha256: sha("a") }],
      ["model/__0_0.distcp", { size: 2 }],
    ]);
    const plan = planPublish(local, { declaration: enc("declaration"), objects }, destination);
    expect(plan).toMatchObject({ action: "publish", createDeclaration: false });
    if (plan.action === "publish") {
      expect(plan.present.map((f) => f.path)).toEqual(["model/.metadata"]);
      expect(plan.upload.map((f) => f.path)).toEqual(["model/__0_0.distcp"]);
    }
  });

  it("refuses another declaration before any write", () => {
    expect(planPublish(local, { declaration: enc("other") }, destination)).toMatchObject({
      action: "refuse",
      code: "PUBLISH_DECLARATION_CONFLICT",
    });
  });

  it("adopts or skips an identical committed archive and refuses a different one", () => {
    const committed = { declaration: enc("declaration"), manifest: enc("manifest") };
    expect(planPublish(local, committed, destination)).toEqual({ action: "adopt" });
    expect(planPublish(local, { manifest: enc("manifest") }, destination)).toEqual({ action: "adopt" });
    const receipt = {
      legacy: false as const,
      marker: {
        schema: "posttrain.archive-marker.v1" as const,
        kind: "artifact" as const,
        iteration: 3,
        destination,
        files: [...local.files].reverse(),
      },
    };
    expect(planPublish({ ...local, receipt }, committed, destination)).toEqual({ action: "skip" });
    expect(planPublish({ ...local, receipt }, committed, { ...destination, prefix: "q" })).toEqual({
      action: "adopt",
    });
    expect(
      planPublish({ ...local, receipt: { legacy: true, text: "done" } }, committed, destination),
    ).toEqual({
      action: "adopt",
    });
    expect(planPublish(local, { ...committed, manifest: enc("other") }, destination)).toMatchObject({
      action: "refuse",
      code: "PUBLISH_REMOTE_CONFLICT",
    });
    expect(planPublish(local, { ...committed, declaration: enc("other") }, destination)).toMatchObject({
      action: "refuse",
      code: "PUBLISH_REMOTE_CONFLICT",
    });
  });
});
