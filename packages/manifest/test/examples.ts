// One realistic, valid example of every record. The tests round-trip them and docs/formats.md
// shows their serialized bytes (a test checks the doc still matches).
import { createHash } from "node:crypto";
import type {
  ArchiveDeclaration,
  ArtifactManifest,
  ControlManifest,
  MaterializedMarker,
  MergeComplete,
  MultiRoleSuccess,
  OverlaySource,
  StagedRecord,
  TensorInventory,
  UploadedMarker,
} from "../src/index.js";
import {
  ARTIFACT_MANIFEST,
  ARCHIVE_DECLARATION,
  UPLOADED_MARKER,
  STAGED_RECORD,
  MERGE_COMPLETE,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  CONTROL_MANIFEST,
  MULTI_ROLE_SUCCESS,
  TENSOR_INVENTORY,
} from "../src/index.js";

/** A deterministic fake digest, so examples are stable and readable. */
export function digestOf(label: string): string {
  return createHash("sha256").update(label).digest("hex");
}

export const artifactManifest: ArtifactManifest = {
  schema: "posttrain.checkpoint-artifact.v1",
  iteration: 300,
  format: "consolidated",
  logical_components: ["model"],
  physical_components: [
    { name: "model", kind: "file", path: "model.pt", size: 1_073_741_824, sha256: digestOf("model.pt") },
  ],
  producer: "ckpt-merge/1",
};

export const dcpArtifactManifest: ArtifactManifest = {
  schema: "posttrain.checkpoint-artifact.v1",
  iteration: 100,
  format: "dcp",
  logical_components: ["model", "training_state"],
  physical_components: [
    { name: "trainer", kind: "file", path: "trainer.pt", size: 4096, sha256: digestOf("trainer.pt") },
    {
      name: "model",
      kind: "dir",
      path: "model",
      files: [
        { path: "__1_0.distcp", size: 52_428_800, sha256: digestOf("__1_0") },
        { path: "__0_0.distcp", size: 52_428_800, sha256: digestOf("__0_0") },
        { path: ".metadata", size: 20_480, sha256: digestOf(".metadata") },
      ],
    },
  ],
};

const manifestBytes = ARTIFACT_MANIFEST.serialize(artifactManifest);
const manifestSha = createHash("sha256").update(manifestBytes).digest("hex");

export const archiveDeclaration: ArchiveDeclaration = {
  schema: "posttrain.artifact-archive.v1",
  manifest_sha256: manifestSha,
  manifest_size: manifestBytes.byteLength,
  files: [
    { path: "model.pt", size: 1_073_741_824, sha256: digestOf("model.pt") },
    { path: ".posttrain-checkpoint-artifact.json", size: manifestBytes.byteLength, sha256: manifestSha },
    { path: ".merge-complete.json", size: 1210, sha256: digestOf(".merge-complete.json") },
    { path: "merge-diagnostics.json", size: 5321, sha256: digestOf("diag") },
  ],
};

const destination = {
  scheme: "s3",
  endpoint: "s3.us-east-1.example.com",
  bucket: "checkpoint-experiments",
  prefix: "vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300",
} as const;

export const uploadedMarker: UploadedMarker = {
  schema: "posttrain.archive-marker.v1",
  kind: "artifact",
  iteration: 300,
  destination,
  files: archiveDeclaration.files,
};

export const fullCheckpointUploadedMarker: UploadedMarker = {
  schema: "posttrain.archive-marker.v1",
  kind: "full_checkpoint",
  iteration: 100,
  destination: { ...destination, prefix: "vlm/grpo/run-a/20260901120000/checkpoints/iter_000000100" },
  files: [
    { path: "model.pt", size: 85_899_345_920 },
    { path: "optim.pt", size: 27_917_287_424 },
    { path: "trainer.pt", size: 4096, sha256: digestOf("trainer.pt") },
  ],
};

export const stagedRecord: StagedRecord = {
  schema: "posttrain.staged-fetch.v1",
  source: {
    uri: "s3://checkpoint-experiments/vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300",
    destination,
    manifest_sha256: manifestSha,
    declaration_sha256: digestOf("declaration"),
  },
  iteration: 300,
  files: [
    { path: "model.pt", size: 1_073_741_824, sha256: digestOf("model.pt") },
    { path: ".posttrain-checkpoint-artifact.json", size: manifestBytes.byteLength, sha256: manifestSha },
  ],
  complete: true,
};

export const mergeComplete: MergeComplete = {
  schema: "posttrain.merge-complete.v1",
  tool_version: "ckpt-merge/1",
  request: {
    mode: "tv",
    experts: [
      { source: "/lustre/runs/expert-a/iter_000000300/model.pt", size: 1_073_741_824, sha256: digestOf("a") },
      { source: "/lustre/runs/expert-b/iter_000000300/model.pt", size: 1_073_741_824, sha256: digestOf("b") },
    ],
    base: { source: "/lustre/bases/qwen-vl-8b", fingerprint: digestOf("base") },
    lam: 0.5,
    iteration: 300,
  },
  files: [
    { path: "model.pt", size: 1_073_741_824, sha256: digestOf("model.pt") },
    { path: ".posttrain-checkpoint-artifact.json", size: manifestBytes.byteLength, sha256: manifestSha },
  ],
  diagnostics: { location: "artifact", path: "merge-diagnostics.json", size: 5321, sha256: digestOf("diag") },
};

const materializeRequest = {
  conversion_version: "materialize_model_pt_to_hf/3",
  source: {
    source: "s3://checkpoint-experiments/vlm/grpo/run-a/20260901120000/checkpoint_artifacts/iter_000000300",
    size: 1_073_741_824,
    sha256: digestOf("model.pt"),
  },
  base: { source: "/lustre/bases/qwen-vl-8b", fingerprint: digestOf("base") },
  options: { unified_chat_template: false },
} as const;

export const materializedMarker: MaterializedMarker = {
  schema: "posttrain.materialized.v1",
  ...materializeRequest,
  shards: [
    { path: "model-00002-of-00002.safetensors", size: 536_870_912, sha256: digestOf("shard2") },
    { path: "model-00001-of-00002.safetensors", size: 536_870_912, sha256: digestOf("shard1") },
    { path: "model.safetensors.index.json", size: 61_440, sha256: digestOf("index") },
  ],
  tensor_count: 883,
  tensors_verified: true,
  chat_template: null,
};

export const overlaySource: OverlaySource = { schema: "posttrain.overlay-source.v1", ...materializeRequest };

export const controlManifest: ControlManifest = {
  schema: "posttrain.checkpoint-manifest.v1",
  iteration: 100,
  components: ["model", "optim"],
  control_generation: "g0001-20260901121500",
  control: {
    trainer: {
      path: ".posttrain/generations/g0001-20260901121500/trainer.pt",
      size: 4096,
      sha256: digestOf("trainer.pt"),
    },
    data: {
      path: ".posttrain/generations/g0001-20260901121500/data.pt",
      size: 812,
      sha256: digestOf("data.pt"),
    },
  },
  validation_publication: null,
};

export const multiRoleSuccess: MultiRoleSuccess = {
  schema: "posttrain.multi-role-boundary.v1",
  iteration: 12,
  roles: { policy: { optimizer_step: 7 }, critic: { optimizer_step: 12 } },
  loop_state: { critic_warmup_iterations: 5 },
};

/** Every example with its file name and serializer, in the order docs/formats.md presents them. */
/** The tensor inventory beside a DCP checkpoint's description: model/ holds two tensors, optim/ their AdamW state. */
const tensorInventory: TensorInventory = {
  schema: TENSOR_INVENTORY.version,
  components: {
    model: [
      { name: "lm_head.weight", dtype: "BF16", shape: [32000, 4096] },
      { name: "embed.weight", dtype: "BF16", shape: [32000, 4096] },
    ],
    trainer: [{ name: "rng.torch", dtype: "U8", shape: [5056] }],
  },
};

export const EXAMPLES: ReadonlyArray<{ file: string; label: string; bytes: () => Uint8Array }> = [
  { file: ".posttrain-checkpoint-artifact.json", label: "consolidated", bytes: () => manifestBytes },
  {
    file: ".posttrain-checkpoint-artifact.json",
    label: "dcp",
    bytes: () => ARTIFACT_MANIFEST.serialize(dcpArtifactManifest),
  },
  {
    file: ".posttrain-archive.json",
    label: "",
    bytes: () => ARCHIVE_DECLARATION.serialize(archiveDeclaration),
  },
  { file: ".uploaded", label: "artifact", bytes: () => UPLOADED_MARKER.serialize(uploadedMarker) },
  {
    file: ".uploaded",
    label: "full_checkpoint",
    bytes: () => UPLOADED_MARKER.serialize(fullCheckpointUploadedMarker),
  },
  { file: ".staged.json", label: "", bytes: () => STAGED_RECORD.serialize(stagedRecord) },
  { file: ".merge-complete.json", label: "", bytes: () => MERGE_COMPLETE.serialize(mergeComplete) },
  { file: ".materialized", label: "", bytes: () => MATERIALIZED_MARKER.serialize(materializedMarker) },
  { file: ".overlay_source.json", label: "", bytes: () => OVERLAY_SOURCE.serialize(overlaySource) },
  { file: ".posttrain-manifest.json", label: "", bytes: () => CONTROL_MANIFEST.serialize(controlManifest) },
  { file: "_SUCCESS", label: "", bytes: () => MULTI_ROLE_SUCCESS.serialize(multiRoleSuccess) },
  {
    file: ".posttrain-checkpoint-tensors.json",
    label: "",
    bytes: () => TENSOR_INVENTORY.serialize(tensorInventory),
  },
];
