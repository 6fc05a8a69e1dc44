import {
  type ArtifactManifest,
  CHECKPOINT_DESCRIPTION,
  type RecordSchema,
  recordApi,
  VALIDATION_STATE_FILE,
} from "@ckpt/manifest";

export { CHECKPOINT_DESCRIPTION_FILE, VALIDATION_STATE_FILE } from "@ckpt/manifest";
import { z } from "zod";

/** The description of a full checkpoint (@ckpt/manifest's record; `verify` judges against it too). */
export const CHECKPOINT_DESCRIPTION_RECORD: RecordSchema<ArtifactManifest> = CHECKPOINT_DESCRIPTION;
export const checkpointDescription = CHECKPOINT_DESCRIPTION;

/** The validation transaction of a full checkpoint. Local: `VALIDATION_STATE_FILE`, replaced atomically at each step. */
export const VALIDATION_STATE_SCHEMA = "posttrain.validation-transaction.v1";

const validationStateSchema = z.strictObject({
  schema: z.literal(VALIDATION_STATE_SCHEMA),
  iteration: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  state: z.enum(["evaluation_pending", "publication_pending", "published"]),
});
export type ValidationRecord = z.infer<typeof validationStateSchema>;

export const VALIDATION_STATE_RECORD: RecordSchema<ValidationRecord> = {
  title: "validation transaction",
  fileName: VALIDATION_STATE_FILE,
  versionField: "schema",
  versions: [VALIDATION_STATE_SCHEMA],
  schema: validationStateSchema,
};
export const validationRecord = recordApi(VALIDATION_STATE_RECORD);

/**
 * Under a direct primary each validation step is a new object (append-only), named so the control
 * manifest's `validation_publication` can reference it: `.validation-publication-<seq>-<state>.json`.
 */
export function validationPublicationName(sequence: number, state: ValidationRecord["state"]): string {
  return `.validation-publication-${sequence}-${state}.json`;
}

/** Where the writer leases of a direct-primary checkpoint root live (one object per epoch). */
export const LEASE_PREFIX = ".posttrain-lease";
export const LEASE_SCHEMA = "posttrain.writer-lease.v1";

const leaseSchema = z.strictObject({
  schema: z.literal(LEASE_SCHEMA),
  /** Takeovers count up; the highest epoch present is the current lease. */
  epoch: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  holder: z.strictObject({
    host: z.string().max(255),
    pid: z.number().int().min(0),
    run_ts: z.string().max(64),
    /** Random per manager instance: the holder recognises its own lease by it. */
    token: z.string().regex(/^[0-9a-f]{32}$/),
  }),
  acquired_at: z.iso.datetime(),
  expires_at: z.iso.datetime(),
  /** Set by a clean finalize: the next writer may take over at once. */
  released: z.boolean(),
});
export type LeaseRecord = z.infer<typeof leaseSchema>;

export const LEASE_RECORD: RecordSchema<LeaseRecord> = {
  title: "writer lease",
  fileName: "epoch-<n>.json",
  versionField: "schema",
  versions: [LEASE_SCHEMA],
  schema: leaseSchema,
};
export const leaseRecord = recordApi(LEASE_RECORD);

/** The lease object of an epoch (zero-padded so listings sort by epoch). */
export function leaseKey(epoch: number): string {
  return `${LEASE_PREFIX}/epoch-${String(epoch).padStart(12, "0")}.json`;
}

export function parseLeaseKey(key: string): number | undefined {
  const match = /(?:^|\/)\.posttrain-lease\/epoch-([0-9]{12})\.json$/.exec(key);
  return match ? Number(match[1]) : undefined;
}
