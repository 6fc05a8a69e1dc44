import { z } from "zod";
import { codedIssue, fileEntrySchema, iterationSchema, recordApi } from "./common.js";
import { CONTROL_MANIFEST_FILE } from "./names.js";

export const CONTROL_MANIFEST_VERSION = "posttrain.checkpoint-manifest.v1";

/** DCP component directories of a full checkpoint, in canonical order. */
export const DCP_COMPONENTS = ["model", "optim", "old", "ref"] as const;
export type DcpComponent = (typeof DCP_COMPONENTS)[number];

/** A control generation id: one path segment, so it can name `.posttrain/generations/<id>/`. */
const generationIdSchema = z.string().superRefine((value, ctx) => {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(value)) {
    codedIssue(
      ctx,
      "RECORD_INVALID_VALUE",
      "a generation id is 1-128 of [A-Za-z0-9._-], starting alphanumeric",
    );
  }
});

/** The directory holding one control generation's files, relative to the iteration directory. */
export function controlGenerationDir(generation: string): string {
  return `.posttrain/generations/${generation}`;
}

const controlManifestSchema = z
  .strictObject({
    schema: z.literal(CONTROL_MANIFEST_VERSION),
    iteration: iterationSchema,
    /** The DCP component directories of this checkpoint; each holds its own `.metadata`. */
    components: z.array(z.enum(DCP_COMPONENTS)).min(2).max(DCP_COMPONENTS.length),
    /** The active (append-only) control generation. */
    control_generation: generationIdSchema,
    control: z.strictObject({
      trainer: fileEntrySchema,
      data: fileEntrySchema.nullable(),
    }),
    /** The validation visibility commit this manifest references, if any (a top-level file). */
    validation_publication: z
      .string()
      .superRefine((value, ctx) => {
        if (!/^\.validation-publication-[A-Za-z0-9._-]{1,128}\.json$/.test(value)) {
          codedIssue(ctx, "RECORD_INVALID_VALUE", "expected .validation-publication-<id>.json");
        }
      })
      .nullable(),
  })
  .superRefine((m, ctx) => {
    const order = m.components.map((c) => DCP_COMPONENTS.indexOf(c));
    for (let i = 1; i < order.length; i++) {
      if (order[i]! <= order[i - 1]!) {
        codedIssue(
          ctx,
          "RECORD_INCONSISTENT",
          `components must be distinct and in the order ${DCP_COMPONENTS.join(", ")}`,
          ["components", i],
        );
        return;
      }
    }
    if (!m.components.includes("model") || !m.components.includes("optim")) {
      codedIssue(ctx, "RECORD_INCONSISTENT", "a full checkpoint has both model and optim", ["components"]);
    }
    const dir = controlGenerationDir(m.control_generation);
    for (const role of ["trainer", "data"] as const) {
      const entry = m.control[role];
      if (entry !== null && entry.path !== `${dir}/${role}.pt`) {
        codedIssue(ctx, "RECORD_INCONSISTENT", `the ${role} descriptor must be ${dir}/${role}.pt`, [
          "control",
          role,
          "path",
        ]);
      }
    }
  });

/** The full-checkpoint control manifest `.posttrain-manifest.json`. */
export type ControlManifest = z.infer<typeof controlManifestSchema>;

export const CONTROL_MANIFEST = recordApi<ControlManifest, typeof CONTROL_MANIFEST_VERSION>({
  title: "checkpoint control manifest",
  fileName: CONTROL_MANIFEST_FILE,
  versionField: "schema",
  versions: [CONTROL_MANIFEST_VERSION],
  schema: controlManifestSchema,
});
