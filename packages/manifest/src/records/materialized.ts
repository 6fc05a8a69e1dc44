import { z } from "zod";
import {
  fileEntrySchema,
  inventorySchema,
  recordApi,
  safeRelativePathSchema,
  sha256Schema,
  sortByPath,
  textSchema,
} from "./common.js";
import { baseIdentitySchema, sourceFileSchema, toolVersionSchema } from "./merge-complete.js";
import { MATERIALIZED_MARKER_FILE, OVERLAY_SOURCE_FILE } from "./names.js";

export const MATERIALIZED_MARKER_VERSION = "posttrain.materialized.v1";
export const OVERLAY_SOURCE_VERSION = "posttrain.overlay-source.v1";
/** The conversion this library's materializer implements; older outputs must be rebuilt. */
export const CURRENT_CONVERSION_VERSION = "materialize_model_pt_to_hf/3";
/** Longest recorded chat-template diff: one hunk of a template is kilobytes. */
const MAX_TEMPLATE_DIFF_LENGTH = 256 * 1024;
/** Most tensors counted in one export: large MoE checkpoints hold ~1e5; this bounds a crafted record. */
const MAX_TENSOR_COUNT = 100_000_000;

/** Options that change the bytes of the output, and so are part of its identity. */
const materializeOptionsSchema = z.strictObject({
  unified_chat_template: z.boolean(),
});
export type MaterializeOptions = z.infer<typeof materializeOptionsSchema>;

/** What a materialize request is: the same identity means the same output. */
const requestShape = {
  /** e.g. `materialize_model_pt_to_hf/3`. */
  conversion_version: toolVersionSchema,
  /** The consolidated model.pt converted: where it came from, its size and digest. */
  source: sourceFileSchema,
  base: baseIdentitySchema,
  options: materializeOptionsSchema,
};

const chatTemplateRecordSchema = z.strictObject({
  /** Digest of the base processor's template text, the canonical form written into both files. */
  processor_template_sha256: sha256Schema,
  /** The shipped digest of each rewritten template file of the output. */
  files: inventorySchema(z.strictObject({ path: safeRelativePathSchema, sha256: sha256Schema })).min(1),
  /** The one-hunk unified diff between the base template and the written one. */
  diff: z.string().max(MAX_TEMPLATE_DIFF_LENGTH),
});

/** The loader calls `--loader-check` ran on the staged build before it was published (all passed). */
const loaderCheckRecordSchema = z.strictObject({
  verdict: z.literal("passed"),
  /** The interpreter the calls ran in, as given. */
  python: textSchema(),
  /** `transformers.__version__` there. */
  transformers_version: textSchema(64),
  /** The calls, in order (`AutoConfig`, the config's architecture class, `AutoTokenizer`, ...). */
  calls: z.array(textSchema(128)).min(1).max(16),
});

const materializedMarkerSchema = z.strictObject({
  schema: z.literal(MATERIALIZED_MARKER_VERSION),
  ...requestShape,
  /** The safetensors shards and their index, relative to the output directory. */
  shards: inventorySchema(fileEntrySchema).min(1),
  tensor_count: z.number().int().min(0).max(MAX_TENSOR_COUNT),
  /** False when the build skipped tensor probing (`--no-verify`). */
  tensors_verified: z.boolean(),
  /** Present when options.unified_chat_template rewrote the template files. */
  chat_template: chatTemplateRecordSchema.nullable(),
  /** Present when the build ran `--loader-check`; optional, so markers written before it stay valid. */
  loader_check: loaderCheckRecordSchema.optional(),
});

/** The Hugging Face output marker `.materialized`: request identity plus the verified shard inventory. */
export type MaterializedMarker = z.infer<typeof materializedMarkerSchema>;

export const MATERIALIZED_MARKER = recordApi<MaterializedMarker, typeof MATERIALIZED_MARKER_VERSION>({
  title: "materialized marker",
  fileName: MATERIALIZED_MARKER_FILE,
  versionField: "schema",
  versions: [MATERIALIZED_MARKER_VERSION],
  schema: materializedMarkerSchema,
  normalize: (m) => ({
    ...m,
    shards: sortByPath(m.shards),
    chat_template: m.chat_template && { ...m.chat_template, files: sortByPath(m.chat_template.files) },
  }),
});

const overlaySourceSchema = z.strictObject({
  schema: z.literal(OVERLAY_SOURCE_VERSION),
  ...requestShape,
  /**
   * The source as the build knew it when it claimed the directory. `sha256` is null when the
   * build hashes its source while converting (the digest of record is then the marker's).
   */
  source: sourceFileSchema.extend({ sha256: sha256Schema.nullable() }),
});

/** `.overlay_source.json`: the identity of the build that owns an intermediate HF output directory. */
export type OverlaySource = z.infer<typeof overlaySourceSchema>;

export const OVERLAY_SOURCE = recordApi<OverlaySource, typeof OVERLAY_SOURCE_VERSION>({
  title: "overlay source record",
  fileName: OVERLAY_SOURCE_FILE,
  versionField: "schema",
  versions: [OVERLAY_SOURCE_VERSION],
  schema: overlaySourceSchema,
});
