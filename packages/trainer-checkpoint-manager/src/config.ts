import {
  CHECKPOINT_FORMATS,
  type CheckpointFormat,
  isRunTs,
  LOGICAL_COMPONENTS,
  type LogicalComponent,
  logicalComponentName,
} from "@ckpt/manifest";
import { z } from "zod";
import { ManagerError } from "./errors.js";

/** The full plan: the only one that makes an exact-resume checkpoint. */
export const FULL_PLAN: readonly LogicalComponent[] = LOGICAL_COMPONENTS;

/** Role names double as sub-directory names of a multi-role boundary (as `_SUCCESS` requires). */
const ROLE_NAME = /^[a-z][a-z0-9_]{0,63}$/;
/** Default lifetime of the direct-primary writer lease; the live writer renews it every third of this. */
export const DEFAULT_LEASE_SECONDS = 600;

/** Where a store setting points: a bucket name (s3) or a store URI, credentials, and a key prefix. */
export interface StoreSettings {
  /** A bare bucket name means `s3://<bucket>`; `s3://`, `gs://`, `file://` and `memory://` URIs are taken as they are. */
  readonly bucket: string;
  /** Path of a credentials JSON file; "" means none (the caller may pass credentials in memory). */
  readonly credentials: string;
  /** Key prefix of the checkpoint root; "" derives `<project>/<group>/<name>/<RUN_TS>/checkpoints`. */
  readonly prefix: string;
}

/** The normalised configuration: every knob present, cross-option rules applied once. */
export interface ManagerConfig {
  readonly save_every: number;
  /** `auto`, `off`, or an explicit checkpoint path (an iter dir, a legacy `.pt`, or under a direct primary an `s3://…/iter_*`). */
  readonly resume: string;
  /** Beyond the seed: the SHA-256 an explicit resume's manifest must have (seed 002's pinned resume), or null. */
  readonly resume_sha256: string | null;
  readonly data: { readonly cursor_resume: "auto" | "strict" | "off" };
  /** "" until resolved: the manager mints it at the first launch and reuses it afterwards. */
  readonly run_ts: string;
  readonly checkpoint_format: CheckpointFormat;
  /** Canonical (table) order. */
  readonly checkpoint_components: readonly LogicalComponent[];
  readonly emergency_checkpoint_components: "full" | "run";
  readonly checkpoint_store: StoreSettings & {
    readonly backend: "local" | "object_store";
    /** Beyond the seed: lifetime of the direct-primary writer lease. */
    readonly lease_seconds: number;
  };
  readonly save_async: boolean;
  /** Resolved: `null` became 1 (local primary) or 0 (direct object-store primary). */
  readonly keep_optim_last: number;
  readonly keep_model_last: number;
  readonly upload: StoreSettings & { readonly enabled: boolean };
  readonly validation: {
    readonly save_checkpoint: boolean;
    /** Canonical (table) order. */
    readonly checkpoint_components: readonly LogicalComponent[];
  };
  /** Beyond the seed: role names of a multi-role boundary (PPO: `["policy", "critic"]`); empty for one role. */
  readonly roles: readonly string[];
}

/** Refuses a component list that is not a non-empty list of distinct known names; returns it in table order. */
function componentList(knob: string) {
  return z.unknown().transform((value, ctx): LogicalComponent[] => {
    const fail = (problem: string) => {
      ctx.addIssue({ code: "custom", message: problem, params: { knob } });
      return z.NEVER;
    };
    if (!Array.isArray(value)) return fail("must be a list of component names");
    if (value.length === 0) return fail("is empty; name at least one component");
    const seen = new Set<string>();
    for (const typed of value) {
      if (typeof typed !== "string") return fail(`holds ${JSON.stringify(typed)}, which is not a string`);
      const item = logicalComponentName(typed);
      if (!(LOGICAL_COMPONENTS as readonly string[]).includes(item)) {
        return fail(`holds unknown component ${JSON.stringify(item)}`);
      }
      if (seen.has(item)) return fail(`lists ${JSON.stringify(item)} twice`);
      seen.add(item);
    }
    return LOGICAL_COMPONENTS.filter((c) => seen.has(c));
  });
}

const storeShape = {
  bucket: z.string().default(""),
  credentials: z.string().default(""),
  prefix: z.string().default(""),
};

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

const rawSchema = z.strictObject({
  save_every: count.default(0),
  resume: z.string().default("auto"),
  resume_sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, "must be 64 lower-case hex digits")
    .nullable()
    .default(null),
  data: z.strictObject({ cursor_resume: z.enum(["auto", "strict", "off"]).default("auto") }).default({
    cursor_resume: "auto",
  }),
  run_ts: z.string().default(""),
  checkpoint_format: z.enum(CHECKPOINT_FORMATS).default("consolidated"),
  checkpoint_components: componentList("checkpoint_components").default([...FULL_PLAN]),
  emergency_checkpoint_components: z.enum(["full", "run"]).default("full"),
  checkpoint_store: z
    .strictObject({
      backend: z.enum(["local", "object_store"]).default("local"),
      ...storeShape,
      lease_seconds: z.number().int().min(10).max(86_400).default(DEFAULT_LEASE_SECONDS),
    })
    .default({
      backend: "local",
      bucket: "",
      credentials: "",
      prefix: "",
      lease_seconds: DEFAULT_LEASE_SECONDS,
    }),
  save_async: z.boolean().default(true),
  keep_optim_last: count.nullable().default(null),
  keep_model_last: count.default(0),
  upload: z
    .strictObject({ enabled: z.boolean().default(false), ...storeShape })
    .default({ enabled: false, bucket: "", credentials: "", prefix: "" }),
  validation: z
    .strictObject({
      save_checkpoint: z.boolean().default(false),
      checkpoint_components: componentList("validation.checkpoint_components").default([...FULL_PLAN]),
    })
    .default({ save_checkpoint: false, checkpoint_components: [...FULL_PLAN] }),
  roles: z.array(z.string()).max(64).default([]),
});

function invalid(knob: string, message: string): ManagerError {
  return new ManagerError("MANAGER_CONFIG_INVALID", `checkpoint config: ${knob} ${message}.`, {
    kind: "input",
    knob,
  });
}

function conflict(knob: string, message: string): ManagerError {
  return new ManagerError("MANAGER_CONFIG_CONFLICT", `checkpoint config: ${message}`, {
    kind: "input",
    knob,
  });
}

function knobOf(issue: z.core.$ZodIssue): string {
  const custom = issue.code === "custom" ? (issue.params as { knob?: unknown } | undefined)?.knob : undefined;
  if (typeof custom === "string") return custom;
  const path = issue.path.filter((s): s is string | number => typeof s !== "symbol").map(String);
  if (issue.code === "unrecognized_keys") path.push(issue.keys[0] ?? "");
  return path.join(".") || "(config)";
}

function describeIssue(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "unrecognized_keys":
      return "is not a checkpoint knob (check the spelling; knobs are listed in docs/trainer-checkpoint-manager.md)";
    case "invalid_type":
      return issue.input === undefined
        ? `is missing (expected ${issue.expected})`
        : `must be ${issue.expected}`;
    case "invalid_value":
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    default:
      return issue.message.charAt(0).toLowerCase() + issue.message.slice(1);
  }
}

const sameSet = (a: readonly LogicalComponent[], b: readonly LogicalComponent[]) =>
  a.length === b.length && a.every((c) => b.includes(c));

/** True when `plan` is the full plan. Pure. */
export function isFullPlan(plan: readonly LogicalComponent[]): boolean {
  return sameSet(plan, FULL_PLAN);
}

/** The plan of an emergency save under `run`: the run's own plan plus the model, in table order. Pure. */
export function runEmergencyPlan(config: Pick<ManagerConfig, "checkpoint_components">): LogicalComponent[] {
  return LOGICAL_COMPONENTS.filter((c) => c === "model" || config.checkpoint_components.includes(c));
}

function requireCheckpointsPrefix(knob: string, prefix: string, why: string): void {
  const trimmed = prefix.endsWith("/") ? prefix.slice(0, -1) : prefix;
  if (trimmed !== "" && trimmed !== "checkpoints" && !trimmed.endsWith("/checkpoints")) {
    throw conflict(
      knob,
      `${knob}=${JSON.stringify(prefix)} must name a checkpoints root (ending in /checkpoints) because ${why}; ` +
        "artifacts go to its sibling checkpoint_artifacts/. Use <project>/<group>/<name>/<run_ts>/checkpoints or leave it empty.",
    );
  }
}

/**
 * Validates a raw checkpoint configuration (the `rl.` knobs of seed 001 as a JSON object, plus
 * `resume_sha256`, `roles` and `checkpoint_store.lease_seconds`) and applies the cross-option
 * rules once: direct object-store primary needs `dcp` and refuses upload and non-zero
 * retention; `keep_optim_last: null` resolves by backend; `emergency_checkpoint_components=run`
 * needs a saving validation plan that covers the run's plan plus `model`; component lists are
 * canonicalised; an active partial plan warns. Throws `ManagerError` naming the knob. Pure.
 */
export function parseManagerConfig(raw: unknown): { config: ManagerConfig; warnings: string[] } {
  const parsed = rawSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const knob = knobOf(issue);
    throw invalid(knob, describeIssue(issue));
  }
  const r = parsed.data;
  const direct = r.checkpoint_store.backend === "object_store";

  if (r.run_ts !== "" && !isRunTs(r.run_ts)) {
    throw invalid(
      "run_ts",
      `${JSON.stringify(r.run_ts)} is not a YYYYmmddHHMMSS timestamp (leave it empty to mint one)`,
    );
  }
  const resume = r.resume === "" ? "off" : r.resume;
  const remoteResume = /^[a-z][a-z0-9+.-]*:\/\//.test(resume);
  if (remoteResume && !direct) {
    throw conflict(
      "resume",
      `resume=${JSON.stringify(resume)} is a store URI, which only a direct object-store primary resumes from. ` +
        "Set checkpoint_store.backend=object_store, or fetch the checkpoint and resume from its local directory.",
    );
  }
  if (r.resume_sha256 !== null && (resume === "auto" || resume === "off")) {
    throw conflict(
      "resume_sha256",
      `resume_sha256 pins an explicit checkpoint, but resume=${resume}. Set resume to the checkpoint's iter directory, or drop the pin.`,
    );
  }
  const seenRoles = new Set<string>();
  for (const role of r.roles) {
    if (!ROLE_NAME.test(role)) {
      throw invalid(
        "roles",
        `holds ${JSON.stringify(role)}; a role is 1-64 of [a-z0-9_], starting with a letter`,
      );
    }
    if (seenRoles.has(role)) throw invalid("roles", `lists ${JSON.stringify(role)} twice`);
    seenRoles.add(role);
  }
  const multiRole = r.roles.length > 0;

  if (direct) {
    if (r.checkpoint_format !== "dcp") {
      throw conflict(
        "checkpoint_format",
        "a direct object-store primary (checkpoint_store.backend=object_store) writes DCP shards in place; set checkpoint_format=dcp. " +
          "Consolidated direct streaming is not supported.",
      );
    }
    if (r.upload.enabled) {
      throw conflict(
        "upload.enabled",
        "upload.enabled=true archives a local primary; with checkpoint_store.backend=object_store the checkpoint already lives in the store. " +
          "Set upload.enabled=false (or use a local primary with upload).",
      );
    }
    for (const knob of ["keep_optim_last", "keep_model_last"] as const) {
      const value = r[knob];
      if (value !== null && value !== 0) {
        throw conflict(
          knob,
          `${knob}=${value} would delete committed remote checkpoints, which a direct object-store primary does not do. ` +
            `Leave ${knob} unset (or 0) and expire old checkpoints with the bucket's lifecycle rules.`,
        );
      }
    }
    if (r.checkpoint_store.bucket === "") {
      throw invalid(
        "checkpoint_store.bucket",
        "is empty; a direct object-store primary needs the bucket (or a store URI)",
      );
    }
    const prefix = r.checkpoint_store.prefix;
    if (/(^|\/)iter_[0-9]+\/?$/.test(prefix)) {
      throw conflict(
        "checkpoint_store.prefix",
        `checkpoint_store.prefix=${JSON.stringify(prefix)} names one iteration; it names the checkpoint root (…/checkpoints) that holds the iter_* prefixes.`,
      );
    }
    if (multiRole) {
      throw conflict(
        "roles",
        "a multi-role boundary (roles) needs the local primary store; set checkpoint_store.backend=local.",
      );
    }
  }
  if (r.upload.enabled) {
    if (r.upload.bucket === "") {
      throw invalid(
        "upload.bucket",
        "is empty; upload.enabled=true needs the bucket (or a store URI) to archive to",
      );
    }
    requireCheckpointsPrefix("upload.prefix", r.upload.prefix, "partial artifacts are archived beside it");
  }

  const regularPartial = !isFullPlan(r.checkpoint_components);
  const validationPartial = !isFullPlan(r.validation.checkpoint_components);
  if (multiRole) {
    if (regularPartial || (r.validation.save_checkpoint && validationPartial)) {
      throw conflict(
        regularPartial ? "checkpoint_components" : "validation.checkpoint_components",
        "a multi-role boundary (roles) always saves the full plan [model, optimizer, training_state]; remove the partial component selection.",
      );
    }
    if (r.emergency_checkpoint_components === "run") {
      throw conflict(
        "emergency_checkpoint_components",
        "emergency_checkpoint_components=run is refused for a multi-role boundary (roles), which always writes the full plan; use full.",
      );
    }
  }
  if (r.emergency_checkpoint_components === "run" && r.validation.save_checkpoint) {
    const needed = runEmergencyPlan(r);
    const missing = needed.filter((c) => !r.validation.checkpoint_components.includes(c));
    if (missing.length > 0) {
      throw conflict(
        "emergency_checkpoint_components",
        `emergency_checkpoint_components=run with validation.save_checkpoint=true needs the validation plan ` +
          `[${r.validation.checkpoint_components.join(", ")}] to cover the run plan plus model [${needed.join(", ")}] ` +
          `(missing ${missing.join(", ")}): a committed validation artifact is never re-committed, so it must stand in for the emergency save. ` +
          "Add the missing components to validation.checkpoint_components, or use emergency_checkpoint_components=full.",
      );
    }
  }
  if (direct && (regularPartial || (r.validation.save_checkpoint && validationPartial))) {
    requireCheckpointsPrefix(
      "checkpoint_store.prefix",
      r.checkpoint_store.prefix,
      "a partial plan is active",
    );
  }

  const config: ManagerConfig = {
    save_every: r.save_every,
    resume,
    resume_sha256: r.resume_sha256,
    data: { cursor_resume: r.data.cursor_resume },
    run_ts: r.run_ts,
    checkpoint_format: r.checkpoint_format,
    checkpoint_components: r.checkpoint_components,
    emergency_checkpoint_components: r.emergency_checkpoint_components,
    checkpoint_store: { ...r.checkpoint_store },
    save_async: r.save_async,
    keep_optim_last: r.keep_optim_last ?? (direct ? 0 : 1),
    keep_model_last: r.keep_model_last,
    upload: { ...r.upload },
    validation: { ...r.validation },
    roles: [...r.roles],
  };
  return { config, warnings: configWarnings(config) };
}

/**
 * The notices an active partial plan deserves: the regular plan is active with a cadence or as
 * the emergency `run` plan, the validation plan only with `validation.save_checkpoint`. Pure.
 */
export function configWarnings(config: ManagerConfig): string[] {
  const warnings: string[] = [];
  const regularActive = config.save_every > 0 || config.emergency_checkpoint_components === "run";
  if (!isFullPlan(config.checkpoint_components) && regularActive) {
    warnings.push(
      `checkpoint_components=[${config.checkpoint_components.join(", ")}] is a partial plan: cadence and final saves become ` +
        "non-resumable checkpoint_artifacts/iter_* artifacts that resume=auto never adopts (continuing from one is a warm start with fresh optimizer state).",
    );
  }
  if (!isFullPlan(config.validation.checkpoint_components) && config.validation.save_checkpoint) {
    warnings.push(
      `validation.checkpoint_components=[${config.validation.checkpoint_components.join(", ")}] is a partial plan: validation saves become ` +
        "non-resumable checkpoint_artifacts/iter_* artifacts.",
    );
  }
  return warnings;
}
