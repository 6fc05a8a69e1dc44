import { z } from "zod";
import {
  codedIssue,
  inventorySchema,
  iterationSchema,
  recordApi,
  safeRelativePathSchema,
  sha256Schema,
  sizedFileEntrySchema,
  sizeSchema,
  sortByPath,
  textSchema,
} from "./common.js";
import { ARTIFACT_MANIFEST_FILE } from "./names.js";
import { tensorListSummarySchema } from "./tensor-list.js";

export const ARTIFACT_MANIFEST_VERSION = "posttrain.checkpoint-artifact.v1";

/** The three backend-neutral component names, in their canonical order. */
export const LOGICAL_COMPONENTS = ["model", "optimizer", "training_state"] as const;
export type LogicalComponent = (typeof LOGICAL_COMPONENTS)[number];

/**
 * Other names a user may type for a logical component: `optim`, the optimizer's file and physical
 * component name. Records always hold the logical names.
 */
const LOGICAL_COMPONENT_ALIASES: ReadonlyMap<string, LogicalComponent> = new Map([["optim", "optimizer"]]);

/** The logical component a typed name stands for (`optim` → `optimizer`); any other name unchanged, for the caller to check. */
export function logicalComponentName(name: string): string {
  return LOGICAL_COMPONENT_ALIASES.get(name) ?? name;
}

/** Physical component names in canonical order, and the logical component each belongs to. */
export const PHYSICAL_COMPONENTS = ["model", "optim", "old", "ref", "trainer", "data"] as const;
export type PhysicalComponentName = (typeof PHYSICAL_COMPONENTS)[number];
const LOGICAL_OF: Record<PhysicalComponentName, LogicalComponent> = {
  model: "model",
  optim: "optimizer",
  old: "training_state",
  ref: "training_state",
  trainer: "training_state",
  data: "training_state",
};

/** The logical component a physical one belongs to (`optim` → `optimizer`, `trainer` → `training_state`). */
export function logicalComponentOf(name: PhysicalComponentName): LogicalComponent {
  return LOGICAL_OF[name];
}

/** The physical component without which a logical one is not saved at all. */
const REQUIRED_PHYSICAL: Record<LogicalComponent, PhysicalComponentName> = {
  model: "model",
  optimizer: "optim",
  training_state: "trainer",
};

export const CHECKPOINT_FORMATS = ["consolidated", "dcp"] as const;
export type CheckpointFormat = (typeof CHECKPOINT_FORMATS)[number];

/** Components that are always single files whatever the format. */
const ALWAYS_FILE: ReadonlySet<PhysicalComponentName> = new Set(["trainer", "data"]);

const physicalFileSchema = z.strictObject({
  name: z.enum(PHYSICAL_COMPONENTS),
  kind: z.literal("file"),
  path: safeRelativePathSchema,
  size: sizeSchema,
  /** Absent when the writer did not hash it; the publisher adds it before archiving. */
  sha256: sha256Schema.optional(),
  /** A `.pt` file's tensors (count and digest of the list, see TENSOR_INVENTORY); absent in older records. */
  tensors: tensorListSummarySchema.optional(),
});

const physicalDirectorySchema = z.strictObject({
  name: z.enum(PHYSICAL_COMPONENTS),
  kind: z.literal("dir"),
  path: safeRelativePathSchema,
  /** Every file of the directory, paths relative to the directory itself. */
  files: inventorySchema(sizedFileEntrySchema).min(1),
  /** A DCP directory's tensors from its `.metadata` (global shapes); absent in older records. */
  tensors: tensorListSummarySchema.optional(),
});

const physicalComponentSchema = z.discriminatedUnion("kind", [physicalFileSchema, physicalDirectorySchema]);
export type PhysicalComponent = z.infer<typeof physicalComponentSchema>;

/** The path a physical component must have: `<name>.pt` for a file, `<name>` for a directory. */
export function physicalComponentPath(name: PhysicalComponentName, kind: "file" | "dir"): string {
  return kind === "file" ? `${name}.pt` : name;
}

const artifactManifestSchema = z
  .strictObject({
    schema: z.literal(ARTIFACT_MANIFEST_VERSION),
    iteration: iterationSchema,
    format: z.enum(CHECKPOINT_FORMATS),
    logical_components: z.array(z.enum(LOGICAL_COMPONENTS)).min(1).max(LOGICAL_COMPONENTS.length),
    physical_components: z.array(physicalComponentSchema).min(1).max(PHYSICAL_COMPONENTS.length),
    /** Who wrote the artifact, e.g. `ckpt-trainer/0.1.0` or `ckpt-merge/1`; informational. */
    producer: textSchema(200).optional(),
  })
  .superRefine((m, ctx) => {
    // Logical components: each once, in the canonical table order.
    const order = m.logical_components.map((c) => LOGICAL_COMPONENTS.indexOf(c));
    for (let i = 1; i < order.length; i++) {
      if (order[i]! <= order[i - 1]!) {
        codedIssue(
          ctx,
          "RECORD_INCONSISTENT",
          `logical components must be distinct and in the order ${LOGICAL_COMPONENTS.join(", ")}`,
          ["logical_components", i],
        );
        return;
      }
    }
    const seen = new Set<PhysicalComponentName>();
    m.physical_components.forEach((c, i) => {
      const at = ["physical_components", i];
      if (seen.has(c.name)) {
        codedIssue(ctx, "RECORD_INCONSISTENT", `physical component ${c.name} is listed twice`, [
          ...at,
          "name",
        ]);
      }
      seen.add(c.name);
      if (!m.logical_components.includes(LOGICAL_OF[c.name])) {
        codedIssue(
          ctx,
          "RECORD_INCONSISTENT",
          `physical component ${c.name} belongs to ${LOGICAL_OF[c.name]}, which is not among the logical components`,
          [...at, "name"],
        );
      }
      const expected = physicalComponentPath(c.name, c.kind);
      if (c.path !== expected) {
        codedIssue(ctx, "RECORD_INCONSISTENT", `a ${c.kind} component ${c.name} must have path ${expected}`, [
          ...at,
          "path",
        ]);
      }
      if (c.kind === "dir" && ALWAYS_FILE.has(c.name)) {
        codedIssue(ctx, "RECORD_INCONSISTENT", `${c.name} is always a single file`, [...at, "kind"]);
      }
      if (m.format === "dcp" && c.kind === "file" && !ALWAYS_FILE.has(c.name)) {
        codedIssue(ctx, "RECORD_INCONSISTENT", `under format dcp, ${c.name} is a directory of shards`, [
          ...at,
          "kind",
        ]);
      }
      // optim may be sharded even when consolidated (a DTensor trainer cannot gather it); the others may not.
      if (m.format === "consolidated" && c.kind === "dir" && c.name !== "optim" && !ALWAYS_FILE.has(c.name)) {
        codedIssue(ctx, "RECORD_INCONSISTENT", `under format consolidated, ${c.name} is a single file`, [
          ...at,
          "kind",
        ]);
      }
    });
    for (const logical of m.logical_components) {
      if (!seen.has(REQUIRED_PHYSICAL[logical])) {
        codedIssue(
          ctx,
          "RECORD_INCONSISTENT",
          `logical component ${logical} is listed but its ${REQUIRED_PHYSICAL[logical]} component is not`,
          ["physical_components"],
        );
      }
    }
  });

/** The native manifest of a checkpoint artifact, `.posttrain-checkpoint-artifact.json`, committed last. */
export type ArtifactManifest = z.infer<typeof artifactManifestSchema>;

function normalizeArtifactManifest(m: ArtifactManifest): ArtifactManifest {
  return {
    ...m,
    physical_components: [...m.physical_components]
      .sort((a, b) => PHYSICAL_COMPONENTS.indexOf(a.name) - PHYSICAL_COMPONENTS.indexOf(b.name))
      .map((c) => (c.kind === "dir" ? { ...c, files: sortByPath(c.files) } : c)),
  };
}

export const ARTIFACT_MANIFEST = recordApi<ArtifactManifest, typeof ARTIFACT_MANIFEST_VERSION>({
  title: "artifact manifest",
  fileName: ARTIFACT_MANIFEST_FILE,
  versionField: "schema",
  versions: [ARTIFACT_MANIFEST_VERSION],
  schema: artifactManifestSchema,
  normalize: normalizeArtifactManifest,
});

/**
 * The description of a full checkpoint, written by the trainer checkpoint manager into
 * `checkpoints/iter_*` (and each role's sub-directory of a multi-role boundary) after every
 * component and before the pointer. It has the artifact manifest's shape with the full plan as its
 * logical components; its own file name keeps it apart from an artifact's commit record. Its
 * SHA-256 is what a pinned resume names; `verify` judges a checkpoint's files against it.
 */
export const CHECKPOINT_DESCRIPTION_FILE = ".posttrain-checkpoint.json";

export const CHECKPOINT_DESCRIPTION = recordApi<ArtifactManifest, typeof ARTIFACT_MANIFEST_VERSION>({
  title: "full checkpoint description",
  fileName: CHECKPOINT_DESCRIPTION_FILE,
  versionField: "schema",
  versions: [ARTIFACT_MANIFEST_VERSION],
  schema: artifactManifestSchema.refine((m) => m.logical_components.length === LOGICAL_COMPONENTS.length, {
    message: "a full checkpoint lists every logical component (model, optimizer, training_state)",
    path: ["logical_components"],
  }),
  normalize: normalizeArtifactManifest,
});

/**
 * Every file an artifact manifest describes, as paths relative to the artifact directory (a
 * directory component's files are prefixed with the component path), in canonical order.
 */
export function artifactPayloadFiles(
  manifest: ArtifactManifest,
): Array<{ path: string; size: number; sha256?: string; component: PhysicalComponentName }> {
  const out: Array<{ path: string; size: number; sha256?: string; component: PhysicalComponentName }> = [];
  for (const c of ARTIFACT_MANIFEST.normalize!(manifest).physical_components) {
    if (c.kind === "file") {
      out.push({ path: c.path, size: c.size, component: c.name, ...(c.sha256 ? { sha256: c.sha256 } : {}) });
    } else {
      for (const f of c.files) {
        out.push({
          path: `${c.path}/${f.path}`,
          size: f.size,
          component: c.name,
          ...(f.sha256 ? { sha256: f.sha256 } : {}),
        });
      }
    }
  }
  return out;
}
