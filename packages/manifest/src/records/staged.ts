import { z } from "zod";
import {
  codedIssue,
  destinationSchema,
  fileEntrySchema,
  inventorySchema,
  iterationSchema,
  recordApi,
  sha256Schema,
  sortByPath,
  textSchema,
} from "./common.js";
import { STAGED_RECORD_FILE } from "./names.js";

export const STAGED_RECORD_VERSION = "posttrain.staged-fetch.v1";

/** The archive a staged directory was fetched from. */
const stagedSourceSchema = z.strictObject({
  /** The artifact URI as requested, e.g. `s3://bucket/run/checkpoint_artifacts/iter_000000300`. */
  uri: textSchema().superRefine((value, ctx) => {
    if (/^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(value)) {
      codedIssue(ctx, "RECORD_BAD_TEXT", "a source URI must not carry user info");
    }
  }),
  destination: destinationSchema,
  /** Digest of the remote native manifest's bytes: the identity a later fetch compares. */
  manifest_sha256: sha256Schema,
  /** Digest of the archive declaration, or null for a legacy archive without one. */
  declaration_sha256: sha256Schema.nullable(),
});
export type StagedSource = z.infer<typeof stagedSourceSchema>;

const stagedRecordSchema = z.strictObject({
  schema: z.literal(STAGED_RECORD_VERSION),
  source: stagedSourceSchema,
  iteration: iterationSchema,
  /** Every file this fetch wrote (or will write) below the staged directory; the only files it may delete. */
  files: inventorySchema(fileEntrySchema),
  /** Set last, once every file is downloaded and verified and the native manifest is in place. */
  complete: z.boolean(),
});

/** The fetch ownership record `.staged.json`: written before the first download, completed last. */
export type StagedRecord = z.infer<typeof stagedRecordSchema>;

export const STAGED_RECORD = recordApi<StagedRecord, typeof STAGED_RECORD_VERSION>({
  title: "staging record",
  fileName: STAGED_RECORD_FILE,
  versionField: "schema",
  versions: [STAGED_RECORD_VERSION],
  schema: stagedRecordSchema,
  normalize: (r) => ({ ...r, files: sortByPath(r.files) }),
});
