// The evidence bundle's schema, `ckpt.evidence.v2`: what a reader (operator, ticket, agent, the
// web view) may rely on. Every bundle buildEvidence returns parses with it (its tests hold that),
// so a consumer can validate a bundle it was handed instead of trusting it.
import { z } from "zod";
import { PROBLEM_CODES } from "./problems.js";

export const EVIDENCE_SCHEMA = "ckpt.evidence.v2";

export const problemSchema = z.strictObject({
  code: z.enum(PROBLEM_CODES),
  severity: z.enum(["error", "warning", "info"]),
  /** The file or directory concerned. */
  subject: z.string(),
  message: z.string(),
  /** The library's own code (`VERIFY_DIGEST_MISMATCH`, `ELOOP`, ...) when one was given. */
  cause: z.string().nullable(),
  remedy: z.string(),
});

const fileSchema = z.strictObject({
  path: z.string(),
  size: z.number().int().nonnegative(),
  /** Recorded digest, where the record holds one. */
  sha256: z.string().nullable(),
});

const componentSchema = z.strictObject({
  name: z.string(),
  /** Relative to the checkpoint's `dir` (`model.pt`, `optim`). */
  path: z.string(),
  kind: z.enum(["file", "directory"]),
  /** On disk now (retention may have released it since the save). */
  present: z.boolean(),
  bytes: z.number().int().nonnegative(),
});

/** A verify run's result as the bundle carries it (null: this bundle did not verify it). */
const verifyResultSchema = z
  .strictObject({
    ok: z.boolean(),
    /** When it ran (ISO 8601). */
    at: z.string(),
    problems: z.array(z.string()),
  })
  .nullable();

/**
 * Whether resume would take it, and why: `null` when it was not probed (past the pointer, or behind
 * a newer complete one); `reason` then says which, and that `ckpt resumable <dir>` probes it.
 */
const resumableSchema = z.strictObject({
  resumable: z.boolean().nullable(),
  reason: z.string(),
  /** What the probe found missing or wrong, one line each (`<code> <path>: <message>` where verify gave a code). */
  findings: z.array(z.string()),
});

export const checkpointSchema = z.strictObject({
  iteration: z.number().int().nonnegative(),
  dir: z.string(),
  /**
   * How format, components and sizes were read: `probed` (its records read as resume reads them:
   * the resume candidates, newest first up to the first complete one) or `listed` (every other
   * checkpoint: its directory listing and a stat of each component; no record read, no digest).
   */
  depth: z.enum(["probed", "listed"]),
  /** `consolidated` or `dcp` (`legacy_file` for a single-file checkpoint); null when neither records nor listing show one. */
  format: z.string().nullable(),
  components: z.array(componentSchema),
  bytes: z.number().int().nonnegative(),
  /** Every file its description records, with digests where hashed; null when not read (only the pointer's checkpoint is). */
  files: z.array(fileSchema).nullable(),
  /** The digest of its description record; null when not read (`depth: "listed"`) or absent. */
  manifest_sha256: z.string().nullable(),
  resume: resumableSchema,
  retention: z.strictObject({
    /** `latest_checkpoint.txt` names it. */
    latest: z.boolean(),
    /** Beyond the pointer: a save that never committed. */
    past_pointer: z.boolean(),
    has_optimizer: z.boolean(),
    /** Retention's view of its upload (`uploaded`, `pending`, `none`, ...). */
    upload: z.string(),
    /** Its validation transaction, when one is open or recorded. */
    validation: z.string().nullable(),
  }),
  last_verify: verifyResultSchema,
});

export const artifactSchema = z.strictObject({
  iteration: z.number().int().nonnegative(),
  dir: z.string(),
  components: z.array(z.string()),
  bytes: z.number().int().nonnegative(),
  payloads: z.array(
    z.strictObject({ path: z.string(), size: z.number().int().nonnegative(), local: z.boolean() }),
  ),
  resume: resumableSchema,
  retention: z.strictObject({ local: z.enum(["yes", "partly", "released"]) }),
  /** The `.uploaded` receipt: where the archive is and what it holds (digests where recorded). */
  archive: z
    .strictObject({ receipt: z.string(), destination: z.string(), files: z.array(fileSchema) })
    .nullable(),
  last_verify: verifyResultSchema,
});

export const attemptSchema = z.strictObject({
  /** The attempt's RUN_TS ("" under the legacy flat layout). */
  run_ts: z.string(),
  dir: z.string(),
  /**
   * How the RUN_TS came to be, as far as the tree shows: `first` (the oldest attempt: minted at the
   * first launch or given), `sibling` (a later one: minted by `resume=off` or given), `legacy` (flat layout).
   */
  minted: z.enum(["first", "sibling", "legacy"]),
  /** When the RUN_TS says it was minted (ISO 8601, UTC), null under the legacy layout. */
  minted_at: z.string().nullable(),
  /**
   * Process windows that used it (the manager's `.ckpt-windows.json`); null: no readable log
   * (written by a manager before the log existed, or damaged: then a problem says so).
   */
  windows: z.number().int().nonnegative().nullable(),
  pointer: z.discriminatedUnion("state", [
    z.strictObject({ state: z.literal("absent") }),
    z.strictObject({ state: z.literal("invalid"), path: z.string(), message: z.string() }),
    z.strictObject({ state: z.literal("present"), path: z.string(), iteration: z.number().int() }),
  ]),
  /** What `resume=auto` would do in this attempt now. */
  resume: z.discriminatedUnion("decision", [
    z.strictObject({
      decision: z.literal("checkpoint"),
      iteration: z.number().int().nullable(),
      dir: z.string(),
      reason: z.string(),
    }),
    z.strictObject({ decision: z.literal("fresh"), reason: z.string() }),
    z.strictObject({ decision: z.literal("refused"), code: z.string(), reason: z.string() }),
    z.strictObject({ decision: z.literal("unknown"), reason: z.string() }),
  ]),
  /** Newest first. */
  checkpoints: z.array(checkpointSchema),
  /** Oldest first. */
  artifacts: z.array(artifactSchema),
});

export const storageSchema = z.strictObject({
  dir: z.string(),
  /** The tier the volume's filesystem type implies (`ckpt doctor volume`). */
  tier: z.enum(["local", "volatile", "shared-safe", "shared-unsafe"]),
  filesystem: z.string(),
  known: z.boolean(),
  promise: z.string(),
  /** The write/sync/rename/read-back probe ran (it writes a file, so only on request). */
  probed: z.boolean(),
  /** The `doctor volume` verdict; with `probed: false` it judges the tier only. */
  ok: z.boolean(),
  reasons: z.array(z.string()),
});

export const evidenceSchema = z.strictObject({
  schema: z.literal(EVIDENCE_SCHEMA),
  /** The directory the bundle was asked about. */
  root: z.string(),
  run: z.strictObject({ dir: z.string(), name: z.string() }),
  /** The newest attempt's resume decision in one word. */
  status: z.enum(["resumable", "fresh", "refused", "unknown"]),
  /** Oldest first. */
  attempts: z.array(attemptSchema),
  storage: storageSchema.nullable(),
  problems: z.array(problemSchema),
  /** False when a bound (entries, time) cut the collection short; its problem says where. */
  complete: z.boolean(),
});

export type Evidence = z.infer<typeof evidenceSchema>;
export type EvidenceProblem = z.infer<typeof problemSchema>;
export type EvidenceAttempt = z.infer<typeof attemptSchema>;
export type EvidenceCheckpoint = z.infer<typeof checkpointSchema>;
export type EvidenceArtifact = z.infer<typeof artifactSchema>;
export type EvidenceStorage = z.infer<typeof storageSchema>;
export type VerifyResult = z.infer<typeof verifyResultSchema>;
