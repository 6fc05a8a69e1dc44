import type { RemoteObjectCheck } from "@ckpt/archive-reader";
import type { ArtifactManifest, UploadedMarker } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import {
  type ArtifactEvidence,
  locateArtifact,
  nextEvidence,
  PRUNE_ERROR_CODES,
  PRUNE_KEEP_CODES,
  type PruneKeepCode,
  planPruneVerified,
} from "../src/index.js";

const DIR = "/runs/a/20260901120000/checkpoint_artifacts/iter_000000300";
const sha = (c: string) => c.repeat(64);
const destination = {
  scheme: "s3",
  endpoint: "s3.example.com",
  bucket: "ckpt",
  prefix: "a/checkpoint_artifacts/iter_000000300",
} as const;

const manifest: ArtifactManifest = {
  schema: "posttrain.checkpoint-artifact.v1",
  iteration: 300,
  format: "dcp",
  logical_components: ["model", "training_state"],
  physical_components: [
    {
      name: "model",
      kind: "dir",
      path: "model",
      files: [
        { path: "__0_0.distcp", size: 10, sha256: sha("a") },
        { path: ".metadata", size: 3 },
      ],
    },
    { name: "trainer", kind: "file", path: "trainer.pt", size: 4 },
  ],
};
const files = [
  { path: ".posttrain-checkpoint-artifact.json", size: 100, sha256: sha("m") },
  { path: "model/.metadata", size: 3, sha256: sha("b") },
  { path: "model/__0_0.distcp", size: 10, sha256: sha("a") },
  { path: "trainer.pt", size: 4, sha256: sha("c") },
];
const marker: UploadedMarker = {
  schema: "posttrain.archive-marker.v1",
  kind: "artifact",
  iteration: 300,
  destination,
  files,
};

function ok(path: string, size: number, digest: string): RemoteObjectCheck {
  return { path, status: "ok", expected: { size, sha256: digest }, actual: { size, sha256: digest } };
}

/** Evidence on which every gate passes. */
function good(): ArtifactEvidence {
  return {
    path: DIR,
    target: { type: "directory", realPath: DIR },
    manifest: { state: "valid", manifest },
    receipt: { state: "valid", marker },
    addressed: { ok: true, destination: { ...destination } },
    local: files.map((f) => ({ path: f.path, type: "file" as const, size: f.size })),
    localDigests: Object.fromEntries(files.map((f) => [f.path, f.sha256])),
    remote: { ok: true, objects: files.map((f) => ok(f.path, f.size, f.sha256)) },
  };
}

function decide(e: ArtifactEvidence): { code?: PruneKeepCode; reason?: string } {
  const plan = planPruneVerified([e]);
  const keep = plan.keep[0];
  return keep === undefined ? {} : { code: keep.code, reason: keep.reason };
}

function withRemote(path: string, check: Partial<RemoteObjectCheck>): ArtifactEvidence {
  const e = good();
  return {
    ...e,
    remote: { ok: false, objects: e.remote!.objects.map((o) => (o.path === path ? { ...o, ...check } : o)) },
  };
}

describe("planPruneVerified", () => {
  it("removes the payload files present locally when every gate passes; the manifest and other records stay", () => {
    const plan = planPruneVerified([good()]);
    expect(plan.keep).toEqual([]);
    expect(plan.remove).toEqual([
      {
        path: DIR,
        artifactDir: DIR,
        files: [
          { path: "model/.metadata", size: 3 },
          { path: "model/__0_0.distcp", size: 10 },
          { path: "trainer.pt", size: 4 },
        ],
        bytes: 17,
      },
    ]);
  });

  it("accepts the artifact's model.pt as the path and removes from its directory", () => {
    const e = {
      ...good(),
      path: `${DIR}/model.pt`,
      target: { type: "file" as const, realPath: `${DIR}/model.pt` },
    };
    expect(planPruneVerified([e]).remove[0]?.artifactDir).toBe(DIR);
  });

  it("releases what is left of a partly released artifact (an interrupted earlier prune)", () => {
    const e = good();
    const local = e.local!.filter((f) => f.path !== "trainer.pt");
    const plan = planPruneVerified([{ ...e, local }]);
    expect(plan.remove[0]?.files.map((f) => f.path)).toEqual(["model/.metadata", "model/__0_0.distcp"]);
  });

  // One case per gate: each fails if its gate is removed, because the rest of the evidence is good.
  it.each<[PruneKeepCode, string, () => ArtifactEvidence, RegExp]>([
    [
      "PRUNE_NOT_FOUND",
      "the path does not exist",
      () => ({ ...good(), target: { type: "missing" } }),
      /does not exist/,
    ],
    [
      "PRUNE_NOT_AN_ARTIFACT",
      "a full checkpoint under checkpoints/",
      () => ({ ...good(), target: { type: "directory", realPath: "/runs/a/x/checkpoints/iter_000000300" } }),
      /retention policies/,
    ],
    [
      "PRUNE_NOT_AN_ARTIFACT",
      "a directory outside checkpoint_artifacts/",
      () => ({ ...good(), target: { type: "directory", realPath: "/tmp/iter_000000300" } }),
      /checkpoint_artifacts\/iter_\*/,
    ],
    [
      "PRUNE_NOT_AN_ARTIFACT",
      "a file in the artifact other than model.pt",
      () => ({ ...good(), target: { type: "file", realPath: `${DIR}/trainer.pt` } }),
      /model\.pt inside one/,
    ],
    [
      "PRUNE_NO_MANIFEST",
      "no native manifest",
      () => ({ ...good(), manifest: { state: "absent" } }),
      /no native manifest/,
    ],
    [
      "PRUNE_INVALID_MANIFEST",
      "an invalid manifest",
      () => ({ ...good(), manifest: { state: "invalid", detail: "JSON_SYNTAX at 1:1" } }),
      /JSON_SYNTAX/,
    ],
    [
      "PRUNE_INVALID_MANIFEST",
      "a manifest of another iteration",
      () => ({ ...good(), manifest: { state: "valid", manifest: { ...manifest, iteration: 200 } } }),
      /iteration 200/,
    ],
    [
      "PRUNE_NO_RECEIPT",
      "no receipt",
      () => ({ ...good(), receipt: { state: "absent" } }),
      /no \.uploaded receipt/,
    ],
    [
      "PRUNE_LEGACY_RECEIPT",
      "a legacy one-line receipt",
      () => ({ ...good(), receipt: { state: "legacy" } }),
      /never authorises/,
    ],
    [
      "PRUNE_MISSING_DIGEST",
      "a receipt entry without a digest",
      () => ({ ...good(), receipt: { state: "invalid", detail: "x", missingDigest: true } }),
      /without a sha256/,
    ],
    [
      "PRUNE_INVALID_RECEIPT",
      "a damaged receipt",
      () => ({ ...good(), receipt: { state: "invalid", detail: "JSON_TRUNCATED", missingDigest: false } }),
      /JSON_TRUNCATED/,
    ],
    [
      "PRUNE_INVALID_RECEIPT",
      "a full-checkpoint receipt",
      () => ({ ...good(), receipt: { state: "valid", marker: { ...marker, kind: "full_checkpoint" } } }),
      /full_checkpoint receipt/,
    ],
    [
      "PRUNE_INVALID_RECEIPT",
      "a receipt of another iteration",
      () => ({ ...good(), receipt: { state: "valid", marker: { ...marker, iteration: 299 } } }),
      /iteration 299/,
    ],
    [
      "PRUNE_DESTINATION_MISMATCH",
      "credentials addressing another endpoint",
      () => ({
        ...good(),
        addressed: { ok: true, destination: { ...destination, endpoint: "other.example.com" } },
      }),
      /binds s3:\/\/ckpt\/a\/checkpoint_artifacts\/iter_000000300 at s3\.example\.com.*other\.example\.com/,
    ],
    [
      "PRUNE_DESTINATION_MISMATCH",
      "a destination that cannot be addressed",
      () => ({ ...good(), addressed: { ok: false, detail: "invalid store URI" } }),
      /cannot be addressed/,
    ],
    [
      "PRUNE_UNCOVERED_PAYLOAD",
      "a payload the receipt does not list",
      () => ({
        ...good(),
        receipt: {
          state: "valid",
          marker: { ...marker, files: files.filter((f) => f.path !== "trainer.pt") },
        },
      }),
      /does not list the payload trainer\.pt/,
    ],
    [
      "PRUNE_MANIFEST_CONFLICT",
      "a manifest digest that contradicts the receipt",
      () => {
        const m = structuredClone(manifest);
        (m.physical_components[0] as { files: { sha256?: string }[] }).files[0]!.sha256 = sha("f");
        return { ...good(), manifest: { state: "valid", manifest: m } };
      },
      /disagree.*model\/__0_0\.distcp/,
    ],
    [
      "PRUNE_UNCOVERED_LOCAL_FILE",
      "an extra local file",
      () => ({ ...good(), local: [...good().local!, { path: "notes.txt", type: "file", size: 1 }] }),
      /notes\.txt is not covered/,
    ],
    [
      "PRUNE_UNCOVERED_LOCAL_FILE",
      "a symbolic link in place of a covered file",
      () => ({
        ...good(),
        local: good().local!.map((f) => (f.path === "trainer.pt" ? { ...f, type: "other" as const } : f)),
      }),
      /trainer\.pt is not covered/,
    ],
    [
      "PRUNE_ALREADY_RELEASED",
      "payloads already gone",
      () => ({
        ...good(),
        local: good().local!.filter((f) => f.path === ".posttrain-checkpoint-artifact.json"),
      }),
      /already released/,
    ],
    [
      "PRUNE_LOCAL_DIGEST_MISMATCH",
      "a local file of another size",
      () => ({
        ...good(),
        local: good().local!.map((f) => (f.path === "trainer.pt" ? { ...f, size: 5 } : f)),
      }),
      /trainer\.pt changed size/,
    ],
    [
      "PRUNE_LOCAL_DIGEST_MISMATCH",
      "local bytes that changed",
      () => ({ ...good(), localDigests: { ...good().localDigests, "trainer.pt": sha("0") } }),
      /trainer\.pt no longer match/,
    ],
    [
      "PRUNE_REMOTE_MISSING",
      "a missing remote object",
      () => withRemote("trainer.pt", { status: "missing" }),
      /trainer\.pt: missing/,
    ],
    [
      "PRUNE_REMOTE_MISSING",
      "a remote check that omits a recorded file",
      () => ({ ...good(), remote: { ok: true, objects: good().remote!.objects.slice(1) } }),
      /\.posttrain-checkpoint-artifact\.json: missing/,
    ],
    [
      "PRUNE_REMOTE_SIZE_MISMATCH",
      "a remote object of another size and digest",
      () => withRemote("trainer.pt", { status: "size_mismatch", actual: { size: 9, sha256: sha("9") } }),
      /another size/,
    ],
    [
      "PRUNE_REMOTE_DIGEST_MISMATCH",
      "a remote object with another digest",
      () => withRemote("trainer.pt", { status: "digest_mismatch", actual: { size: 4, sha256: sha("9") } }),
      /another sha256/,
    ],
    [
      "PRUNE_REMOTE_DIGEST_ABSENT",
      "a remote object without digest metadata",
      () => withRemote("trainer.pt", { status: "digest_absent", actual: { size: 4 } }),
      /without sha256 metadata/,
    ],
    [
      "PRUNE_REMOTE_SIZE_CONFLICT",
      "a remote object claiming the recorded digest with another size",
      () => withRemote("trainer.pt", { status: "size_mismatch", actual: { size: 5, sha256: sha("c") } }),
      /claims the recorded sha256 with another size \(5 bytes, 4 recorded\)/,
    ],
  ])("keeps with %s: %s", (code, _what, evidence, reason) => {
    const decision = decide(evidence());
    expect(decision.code).toBe(code);
    expect(decision.reason).toMatch(reason);
  });

  it("a size conflict outranks every other remote problem of the artifact", () => {
    const e = withRemote("trainer.pt", { status: "size_mismatch", actual: { size: 5, sha256: sha("c") } });
    const objects = e.remote!.objects.map((o) =>
      o.path === "model/.metadata" ? { ...o, status: "missing" as const } : o,
    );
    expect(decide({ ...e, remote: { ok: false, objects } }).code).toBe("PRUNE_REMOTE_SIZE_CONFLICT");
  });

  it("only executor failures and the size conflict are errors", () => {
    expect([...PRUNE_ERROR_CODES].sort()).toEqual(
      [
        "PRUNE_DELETE_FAILED",
        "PRUNE_LOCAL_CHANGED",
        "PRUNE_LOCAL_UNREADABLE",
        "PRUNE_REMOTE_SIZE_CONFLICT",
        "PRUNE_REMOTE_UNREACHABLE",
      ].sort(),
    );
    expect([...PRUNE_ERROR_CODES].every((c) => PRUNE_KEEP_CODES.includes(c))).toBe(true);
  });

  it("asks for evidence gate by gate and never for hashing or HEADs once a cheap gate keeps", () => {
    const full = good();
    const asked: string[] = [];
    let e: ArtifactEvidence = { path: full.path, target: full.target };
    for (let field = nextEvidence(e); field !== undefined; field = nextEvidence(e)) {
      asked.push(field);
      e = { ...e, [field]: full[field] };
    }
    expect(asked).toEqual(["manifest", "receipt", "addressed", "local", "localDigests", "remote"]);
    expect(
      nextEvidence({ path: DIR, target: full.target, manifest: full.manifest, receipt: { state: "legacy" } }),
    ).toBe(undefined);
  });

  it("refuses to plan on incomplete evidence", () => {
    const { remote: _remote, ...partial } = good();
    expect(() => planPruneVerified([partial])).toThrow(
      expect.objectContaining({ code: "RETENTION_EVIDENCE_INCOMPLETE", kind: "input" }),
    );
  });

  it("locateArtifact names the artifact directory of a model.pt and refuses anything else", () => {
    expect(locateArtifact({ type: "file", realPath: `${DIR}/model.pt` })).toEqual({
      ok: true,
      dir: DIR,
      iteration: 300,
    });
    expect(locateArtifact({ type: "directory", realPath: `${DIR}/model.pt` }).ok).toBe(false);
    expect(locateArtifact({ type: "other", realPath: DIR }).ok).toBe(false);
  });
});
