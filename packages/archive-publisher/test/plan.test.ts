import {
  ARTIFACT_MANIFEST,
  MERGE_COMPLETE,
  type ArtifactManifest,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  type MergeComplete,
} from "@ckpt/manifest";
import fc from "fast-check";
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
    { path: ARTIFACT_MANIFEST.fileName, size: 8, sha256: sha("1") },
    { path: "model/.metadata", size: 1, sha256: sha("a") },
    { path: "model/__0_0.distcp", size: 2, sha256: sha("b") },
  ],
  absent: [],
  unverified: [],
  declarationBytes: enc("declaration"),
};

describe("selectArchiveFiles (pure)", () => {
  it("selects payloads, the manifest and only the records that exist", () => {
    expect(selectArchiveFiles(manifest, { legacyManifest: false }).map((f) => [f.path, f.role])).toEqual([
      [ARTIFACT_MANIFEST.fileName, "manifest"],
      ["model/.metadata", "payload"],
      ["model/__0_0.distcp", "payload"],
    ]);
    const merge = {
      diagnostics: { location: "artifact", path: "diag/d.json", size: 5, sha256: sha("d") },
    } as unknown as MergeComplete;
    expect(
      selectArchiveFiles(manifest, { legacyManifest: true, mergeComplete: merge }).map((f) => f.path),
    ).toEqual([
      MERGE_COMPLETE.fileName,
      ARTIFACT_MANIFEST.fileName,
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

describe("planPublish of a released artifact (pure)", () => {
  // model/__0_0.distcp was released; model/.metadata is still on disk (a partial release).
  const released: LocalArtifact = { ...local, absent: ["model/__0_0.distcp"] };
  const marker = {
    schema: "posttrain.archive-marker.v1" as const,
    kind: "artifact" as const,
    iteration: 3,
    destination,
    files: local.files,
  };
  const covered: LocalArtifact = { ...released, receipt: { legacy: false, marker } };
  const committed = { declaration: enc("declaration"), manifest: enc("manifest") };

  it("skips when this destination's receipt records exactly the inventory and the archive is committed", () => {
    expect(planPublish(covered, committed, destination)).toEqual({ action: "skip" });
    expect(planPublish(covered, { manifest: enc("manifest") }, destination)).toEqual({ action: "skip" });
  });

  it("refuses absent payloads that no receipt of this destination covers, naming them", () => {
    const cases: Array<[LocalArtifact, string]> = [
      [released, "no readable .uploaded"],
      [{ ...released, receipt: { legacy: true, text: "done" } }, "legacy"],
      [
        {
          ...released,
          receipt: { legacy: false, marker: { ...marker, destination: { ...destination, prefix: "q" } } },
        },
        "another destination (memory m/q)",
      ],
      [{ ...released, receipt: { legacy: false, marker: { ...marker, iteration: 4 } } }, "iteration 4"],
      [
        { ...released, receipt: { legacy: false, marker: { ...marker, kind: "full_checkpoint" as const } } },
        "full_checkpoint",
      ],
      // The payload still present hashes to another digest than the receipt records.
      [
        {
          ...covered,
          files: local.files.map((f) => (f.path === "model/.metadata" ? { ...f, sha256: sha("c") } : f)),
        },
        "another inventory",
      ],
      // The receipt does not record the released payload.
      [
        { ...released, receipt: { legacy: false, marker: { ...marker, files: local.files.slice(0, 2) } } },
        "another inventory",
      ],
    ];
    for (const [artifact, why] of cases) {
      const plan = planPublish(artifact, committed, destination);
      expect(plan, why).toMatchObject({
        action: "refuse",
        code: "PUBLISH_PAYLOAD_MISMATCH",
        subject: "/x/iter_3/model/__0_0.distcp",
      });
      if (plan.action === "refuse") {
        expect(plan.reason).toContain("model/__0_0.distcp is not on disk");
        expect(plan.reason).toContain(why);
      }
    }
  });

  it("refuses when the archive the receipt records is gone, naming what is missing", () => {
    const none = planPublish(covered, { declaration: enc("declaration"), objects: new Map() }, destination);
    expect(none).toMatchObject({
      action: "refuse",
      code: "PUBLISH_RELEASED_REMOTE_INVALID",
      subject: ARTIFACT_MANIFEST.fileName,
    });
    if (none.action === "refuse") {
      expect(none.reason).toContain(`holds no ${ARTIFACT_MANIFEST.fileName}`);
      expect(none.reason).toContain("model/.metadata: missing");
      expect(none.reason).toContain("model/__0_0.distcp: missing");
    }
    const objects = new Map([
      ["model/.metadata", { size: 1, sha256: sha("a") }],
      ["model/__0_0.distcp", { size: 2, sha256: sha("e") }],
    ]);
    const changed = planPublish(covered, { objects }, destination);
    if (changed.action !== "refuse") throw new Error(`expected a refusal, got ${changed.action}`);
    expect(changed.reason).not.toContain("model/.metadata");
    expect(changed.reason).toContain(`model/__0_0.distcp: the object's sha256 is ${sha("e")}`);
    const whole = planPublish(
      covered,
      { objects: new Map([...objects, ["model/__0_0.distcp", { size: 2, sha256: sha("b") }]]) },
      destination,
    );
    if (whole.action !== "refuse") throw new Error(`expected a refusal, got ${whole.action}`);
    expect(whole.reason.endsWith(`holds no ${ARTIFACT_MANIFEST.fileName}`)).toBe(true);
    for (const [remote, what] of [
      [{ ...committed, manifest: enc("other") }, "a different .posttrain-checkpoint-artifact.json"],
      [{ ...committed, declaration: enc("other") }, "a different inventory in .posttrain-archive.json"],
    ] as const) {
      const plan = planPublish(covered, remote, destination);
      expect(plan, what).toMatchObject({ action: "refuse", code: "PUBLISH_RELEASED_REMOTE_INVALID" });
      if (plan.action === "refuse") expect(plan.reason).toContain(what);
    }
  });

  it("never uploads or adopts on behalf of a released payload, whatever the remote and the receipt", () => {
    const receipts = [undefined, { legacy: true as const, text: "x" }, { legacy: false as const, marker }];
    const remote = fc.record(
      {
        declaration: fc.constantFrom(enc("declaration"), enc("other")),
        manifest: fc.constantFrom(enc("manifest"), enc("other")),
        objects: fc.constant(new Map<string, { size: number; sha256?: string }>()),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(remote, fc.constantFrom(...receipts), (state, receipt) => {
        const plan = planPublish({ ...released, ...(receipt ? { receipt } : {}) }, state, destination);
        expect(["skip", "refuse"]).toContain(plan.action);
      }),
    );
  });
});
