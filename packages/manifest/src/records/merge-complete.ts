import { z } from "zod";
import {
  codedIssue,
  fileEntrySchema,
  inventorySchema,
  iterationSchema,
  recordApi,
  safeRelativePathSchema,
  sha256Schema,
  sizeSchema,
  sortByPath,
  textSchema,
} from "./common.js";
import { MERGE_COMPLETE_FILE } from "./names.js";

export const MERGE_COMPLETE_VERSION = "posttrain.merge-complete.v1";
/** Most experts in one merge: real merges use a handful; this bounds a crafted record. */
export const MAX_MERGE_EXPERTS = 1024;
/** Largest |lam| accepted: task-vector scales are O(1); a huge value is a typo or an attack. */
export const MAX_ABS_LAM = 1_000_000;

/** A tool version such as `ckpt-merge/1`: a name, a slash and an integer revision. */
export const toolVersionSchema = z.string().superRefine((value, ctx) => {
  if (!/^[a-z][a-z0-9_.-]{0,63}\/[0-9]{1,9}$/.test(value)) {
    codedIssue(ctx, "RECORD_INVALID_VALUE", "a tool version is <name>/<integer>, e.g. ckpt-merge/1");
  }
});

/** An input file named by where it was read from (never re-opened through this record) and its content. */
export const sourceFileSchema = z.strictObject({
  source: textSchema(),
  size: sizeSchema,
  sha256: sha256Schema,
});
export type SourceFile = z.infer<typeof sourceFileSchema>;

/** A Hugging Face base directory: where it was read from and a digest over its identity files. */
export const baseIdentitySchema = z.strictObject({
  source: textSchema(),
  fingerprint: sha256Schema,
});
export type BaseIdentity = z.infer<typeof baseIdentitySchema>;

const mergeRequestSchema = z
  .strictObject({
    /** `avg`: uniform average of the experts; `tv`: task-vector sum onto the base, scaled by lam. */
    mode: z.enum(["avg", "tv"]),
    /** In the order given: the order is part of the request identity. */
    experts: z.array(sourceFileSchema).min(1).max(MAX_MERGE_EXPERTS),
    base: baseIdentitySchema.nullable(),
    lam: z.number().min(-MAX_ABS_LAM).max(MAX_ABS_LAM).nullable(),
    iteration: iterationSchema,
  })
  .superRefine((r, ctx) => {
    if (r.mode === "tv" && r.base === null) {
      codedIssue(ctx, "RECORD_INCONSISTENT", "mode tv needs a base", ["base"]);
    }
    if (r.mode === "tv" && r.lam === null)
      codedIssue(ctx, "RECORD_INCONSISTENT", "mode tv needs lam", ["lam"]);
    if (r.mode === "avg" && r.lam !== null) {
      codedIssue(ctx, "RECORD_INCONSISTENT", "mode avg takes no lam (the base cancels)", ["lam"]);
    }
  });
export type MergeRequest = z.infer<typeof mergeRequestSchema>;

const mergeDiagnosticsSchema = z.discriminatedUnion("location", [
  /** Inside the artifact directory: archived with it. */
  z.strictObject({
    location: z.literal("artifact"),
    path: safeRelativePathSchema,
    size: sizeSchema,
    sha256: sha256Schema,
  }),
  /** Elsewhere: recorded for the operator, never archived or opened through this record. */
  z.strictObject({ location: z.literal("external"), source: textSchema() }),
]);

const mergeCompleteSchema = z.strictObject({
  schema: z.literal(MERGE_COMPLETE_VERSION),
  tool_version: toolVersionSchema,
  request: mergeRequestSchema,
  /** The completed artifact's files relative to its directory (weights and native manifest). */
  files: inventorySchema(fileEntrySchema).min(1),
  diagnostics: mergeDiagnosticsSchema.nullable(),
});

/** The merge completion record `.merge-complete.json`, written after the artifact and its manifest. */
export type MergeComplete = z.infer<typeof mergeCompleteSchema>;

export const MERGE_COMPLETE = recordApi<MergeComplete, typeof MERGE_COMPLETE_VERSION>({
  title: "merge completion record",
  fileName: MERGE_COMPLETE_FILE,
  versionField: "schema",
  versions: [MERGE_COMPLETE_VERSION],
  schema: mergeCompleteSchema,
  normalize: (r) => ({ ...r, files: sortByPath(r.files) }),
});
