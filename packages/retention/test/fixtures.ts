import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  UPLOADED_MARKER,
  type ArtifactManifest,
  sha256Hex,
  type UploadedMarker,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";

export interface ArtifactFixture {
  readonly dir: string;
  readonly iteration: number;
  /** Every file of the artifact (payload and manifest) with its bytes. */
  readonly files: ReadonlyMap<string, Uint8Array>;
  /** Payload files, as the manifest lists them. */
  readonly payload: readonly string[];
  readonly payloadBytes: number;
}

/**
 * A committed DCP-free artifact under `<root>/run/<ts>/checkpoint_artifacts/iter_<n>`: model.pt,
 * trainer.pt and the native manifest (with digests), written locally.
 */
export async function makeArtifact(
  root: string,
  iteration = 300,
  modelBytes = 4096,
): Promise<ArtifactFixture> {
  const dir = join(
    root,
    "run",
    "20260901120000",
    "checkpoint_artifacts",
    `iter_${String(iteration).padStart(9, "0")}`,
  );
  const model = randomBytes(modelBytes);
  const trainer = randomBytes(64);
  const manifest: ArtifactManifest = {
    schema: "posttrain.checkpoint-artifact.v1",
    iteration,
    format: "consolidated",
    logical_components: ["model", "training_state"],
    physical_components: [
      { name: "model", kind: "file", path: "model.pt", size: model.length, sha256: sha256Hex(model) },
      { name: "trainer", kind: "file", path: "trainer.pt", size: trainer.length },
    ],
  };
  const files = new Map<string, Uint8Array>([
    ["model.pt", model],
    ["trainer.pt", trainer],
    [ARTIFACT_MANIFEST.fileName, ARTIFACT_MANIFEST.serialize(manifest)],
  ]);
  for (const [path, bytes] of files) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), bytes);
  }
  return {
    dir,
    iteration,
    files,
    payload: ["model.pt", "trainer.pt"],
    payloadBytes: model.length + trainer.length,
  };
}

/**
 * What the publisher leaves behind, made directly: every file uploaded with its sha256 metadata and
 * a JSON receipt bound to `store.identity`. Returns the receipt.
 */
export async function publishDirectly(
  artifact: ArtifactFixture,
  store: ObjectStore,
): Promise<UploadedMarker> {
  for (const [path, bytes] of artifact.files) await store.put(path, bytes, { sha256: sha256Hex(bytes) });
  const marker: UploadedMarker = {
    schema: "posttrain.archive-marker.v1",
    kind: "artifact",
    iteration: artifact.iteration,
    destination: { ...store.identity },
    files: [...artifact.files].map(([path, bytes]) => ({
      path,
      size: bytes.length,
      sha256: sha256Hex(bytes),
    })),
  };
  await writeReceipt(artifact.dir, UPLOADED_MARKER.serialize(marker));
  return marker;
}

export async function writeReceipt(dir: string, bytes: Uint8Array | string): Promise<void> {
  await writeFile(join(dir, UPLOADED_MARKER.fileName), bytes);
}
