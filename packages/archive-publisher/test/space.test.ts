import { describe, expect, it } from "vitest";
import { publishSpaceNeeds } from "../src/internal/space.js";
import type { LocalArtifact, PublishPlan } from "../src/plan.js";

const local = (over: Partial<LocalArtifact> = {}): LocalArtifact =>
  ({
    dir: "/art/iter_000000300",
    manifestBytes: new Uint8Array(100),
    manifestRewrite: false,
    declarationBytes: new Uint8Array(40),
    ...over,
  }) as LocalArtifact;
const entry = (path: string, size: number) => ({ path, size, sha256: "0".repeat(64) });
const file = { scheme: "file", endpoint: "local", bucket: "/store/iter_000000300", prefix: "" } as const;
const s3 = { scheme: "s3", endpoint: "s3.example", bucket: "b", prefix: "p" } as const;

describe("publishSpaceNeeds", () => {
  it("asks a file:// store's root for the payloads to upload and the records, and the artifact for the receipt", () => {
    const plan: PublishPlan = {
      action: "publish",
      createDeclaration: true,
      upload: [entry("model.pt", 5000)],
      present: [],
    };
    expect(publishSpaceNeeds(local(), plan, file, 300)).toEqual([
      {
        path: "/store/iter_000000300",
        bytes: 5000 + 40 + 100,
        what: "1 payload file(s) and the archive records",
      },
      { path: "/art/iter_000000300", bytes: 300, what: "the local manifest and receipt" },
    ]);
  });

  it("asks nothing of a remote store, counts a manifest rewrite with its legacy original, and no receipt for a skip", () => {
    const rewrite = local({ manifestRewrite: true, legacyOriginal: new Uint8Array(20) });
    const plan: PublishPlan = { action: "publish", createDeclaration: false, upload: [], present: [] };
    expect(publishSpaceNeeds(rewrite, plan, s3, 300)).toEqual([
      { path: "/art/iter_000000300", bytes: 100 + 20 + 300, what: "the local manifest and receipt" },
    ]);
    expect(publishSpaceNeeds(local(), { action: "skip" }, file, 300)).toEqual([
      { path: "/art/iter_000000300", bytes: 0, what: "the local manifest and receipt" },
    ]);
  });
});
