import { createHash } from "node:crypto";
import { type Destination, ARCHIVE_DECLARATION, ARTIFACT_MANIFEST, UPLOADED_MARKER } from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** A published consolidated artifact in `store` (declaration, model.pt, manifest last) and its receipt bytes. */
export async function publishFixture(
  store: ObjectStore,
  model: Uint8Array = new Uint8Array(2048).map((_, i) => (i * 7) % 251),
): Promise<{ receipt: (destination: Destination) => Uint8Array; model: Uint8Array }> {
  const manifest = ARTIFACT_MANIFEST.serialize({
    schema: "posttrain.checkpoint-artifact.v1",
    iteration: 300,
    format: "consolidated",
    logical_components: ["model"],
    physical_components: [
      { name: "model", kind: "file", path: "model.pt", size: model.length, sha256: sha(model) },
    ],
  });
  const files = [
    { path: ".posttrain-checkpoint-artifact.json", size: manifest.length, sha256: sha(manifest) },
    { path: "model.pt", size: model.length, sha256: sha(model) },
  ];
  const declaration = ARCHIVE_DECLARATION.serialize({
    schema: "posttrain.artifact-archive.v1",
    manifest_sha256: sha(manifest),
    manifest_size: manifest.length,
    files,
  });
  await store.put(".posttrain-archive.json", declaration, { sha256: sha(declaration) });
  await store.put("model.pt", model, { sha256: sha(model) });
  await store.put(".posttrain-checkpoint-artifact.json", manifest, { sha256: sha(manifest) });
  return {
    model,
    receipt: (destination) =>
      UPLOADED_MARKER.serialize({
        schema: "posttrain.archive-marker.v1",
        kind: "artifact",
        iteration: 300,
        destination,
        files,
      }),
  };
}
