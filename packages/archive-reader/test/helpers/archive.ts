import { createHash } from "node:crypto";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  UPLOADED_MARKER,
  type ArtifactManifest,
  type Destination,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { seededBytes as bytes } from "@ckpt/test-utils";

export const sha = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");
export const text = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Deterministic pseudo-random bytes, so files differ and a swapped byte changes the digest. */
export { bytes };

/** An artifact as the publisher leaves it: payload files, native manifest and declaration bytes. */
export interface TestArtifact {
  readonly iteration: number;
  readonly manifest: ArtifactManifest;
  readonly manifestBytes: Uint8Array;
  readonly declarationBytes: Uint8Array;
  /** Every archived file (payloads, extra records, the manifest) by relative path. */
  readonly files: ReadonlyMap<string, Uint8Array>;
  /** The payload paths a fetch stages (model components), excluding the manifest. */
  readonly payloads: readonly string[];
}

export interface ArtifactSpec {
  readonly iteration?: number;
  /** consolidated: the model.pt bytes. */
  readonly model?: Uint8Array;
  /** dcp: files of the model directory (relative to it). */
  readonly dcpModel?: ReadonlyMap<string, Uint8Array>;
  readonly trainer?: Uint8Array;
  /** Records archived beside the payloads (merge completion, diagnostics). */
  readonly extras?: ReadonlyMap<string, Uint8Array>;
  /** Leave digests out of the manifest's descriptors (a legacy writer). */
  readonly manifestWithoutDigests?: boolean;
}

export function makeArtifact(spec: ArtifactSpec = {}): TestArtifact {
  const iteration = spec.iteration ?? 300;
  const files = new Map<string, Uint8Array>();
  const payloads: string[] = [];
  const digest = (b: Uint8Array) => (spec.manifestWithoutDigests ? {} : { sha256: sha(b) });
  const physical: ArtifactManifest["physical_components"] = [];
  const logical: ArtifactManifest["logical_components"] = ["model"];
  if (spec.dcpModel !== undefined) {
    const entries = [...spec.dcpModel].map(([path, b]) => ({ path, size: b.length, ...digest(b) }));
    physical.push({ name: "model", kind: "dir", path: "model", files: entries });
    for (const [path, b] of spec.dcpModel) {
      files.set(`model/${path}`, b);
      payloads.push(`model/${path}`);
    }
  } else {
    const model = spec.model ?? bytes(3000);
    physical.push({ name: "model", kind: "file", path: "model.pt", size: model.length, ...digest(model) });
    files.set("model.pt", model);
    payloads.push("model.pt");
  }
  if (spec.trainer !== undefined) {
    logical.push("training_state");
    physical.push({
      name: "trainer",
      kind: "file",
      path: "trainer.pt",
      size: spec.trainer.length,
      ...digest(spec.trainer),
    });
    files.set("trainer.pt", spec.trainer);
    payloads.push("trainer.pt");
  }
  const manifest: ArtifactManifest = {
    schema: "posttrain.checkpoint-artifact.v1",
    iteration,
    format: spec.dcpModel === undefined ? "consolidated" : "dcp",
    logical_components: logical,
    physical_components: physical,
  };
  const manifestBytes = ARTIFACT_MANIFEST.serialize(manifest);
  for (const [path, b] of spec.extras ?? []) files.set(path, b);
  files.set(ARTIFACT_MANIFEST.fileName, manifestBytes);
  const declarationBytes = ARCHIVE_DECLARATION.serialize({
    schema: "posttrain.artifact-archive.v1",
    manifest_sha256: sha(manifestBytes),
    manifest_size: manifestBytes.length,
    files: [...files].map(([path, b]) => ({ path, size: b.length, sha256: sha(b) })),
  });
  return { iteration, manifest, manifestBytes, declarationBytes, files, payloads: payloads.sort() };
}

export interface PutArchiveOptions {
  /** Write no declaration (a legacy archive). */
  readonly withoutDeclaration?: boolean;
  /** Put objects without sha256 metadata. */
  readonly withoutDigestMetadata?: boolean;
  /** Paths not to upload (a lost shard, an unfinished archive without its manifest). */
  readonly omit?: readonly string[];
}

/** Puts an artifact into a store the way a publisher does: declaration, payloads, manifest last. */
export async function putArchive(
  store: ObjectStore,
  artifact: TestArtifact,
  options: PutArchiveOptions = {},
) {
  const omit = new Set(options.omit ?? []);
  if (!options.withoutDeclaration)
    await store.put(ARCHIVE_DECLARATION.fileName, artifact.declarationBytes, {
      sha256: sha(artifact.declarationBytes),
    });
  const ordered = [...artifact.files].sort(
    ([a], [b]) => Number(a === ARTIFACT_MANIFEST.fileName) - Number(b === ARTIFACT_MANIFEST.fileName),
  );
  for (const [path, b] of ordered) {
    if (omit.has(path)) continue;
    await store.put(path, b, options.withoutDigestMetadata ? {} : { sha256: sha(b) });
  }
}

/** Receipt bytes for an artifact archived at `destination`. */
export function receiptFor(artifact: TestArtifact, destination: Destination): Uint8Array {
  return UPLOADED_MARKER.serialize({
    schema: "posttrain.archive-marker.v1",
    kind: "artifact",
    iteration: artifact.iteration,
    destination,
    files: [...artifact.files].map(([path, b]) => ({ path, size: b.length, sha256: sha(b) })),
  });
}
