import { LOGICAL_COMPONENTS, type LogicalComponent } from "@ckpt/manifest";
import { FULL_PLAN, isFullPlan, type ManagerConfig, runEmergencyPlan } from "./config.js";
import { ManagerError } from "./errors.js";

/** Why a save happens at a step. */
export type SaveReason = "cadence" | "final" | "validation" | "emergency";

/**
 * What is due at a step, as the training loop sees it. The loop owns its step axis (GRPO's cadence
 * counts collected batches while iter_* counts optimizer steps), so it says whether the cadence is
 * due; `cadenceDue` computes the usual `counter % save_every == 0`.
 */
export interface SaveDue {
  /** The regular save_every boundary. */
  readonly cadence?: boolean;
  /** Normal completion of the run (saved even off cadence). */
  readonly final?: boolean;
  /** Model validation runs at this step. */
  readonly validation?: boolean;
  /** A termination request (preemption, timeout) was observed at this step boundary. */
  readonly emergency?: boolean;
  /**
   * This is the before-training validation pass of a fresh run with steps remaining: it never
   * saves (a termination then exits without saving, so the next fresh start retries it).
   */
  readonly initial?: boolean;
}

/** What this attempt has already committed for a step. */
export interface StepCoverage {
  /** A full checkpoint of the step is committed. */
  readonly full: boolean;
  /** The logical components of the step's committed artifact, if there is one. */
  readonly artifact?: readonly LogicalComponent[];
}

/**
 * How the save relates to the step's validation:
 * - `none`: no validation is involved;
 * - `pending`: the durable transaction: commit a full checkpoint marked evaluation-pending, then
 *   validate, then publish (`completeValidation`);
 * - `commit_before`: a partial save that is due anyway: commit the artifact, then validate
 *   (a failed validation cannot discard the due save);
 * - `commit_after`: a partial save requested only by validation: validate first, save after success.
 */
export type ValidationMode = "none" | "pending" | "commit_before" | "commit_after";

/** A decided save. `kind` full goes to `checkpoints/iter_*`, artifact to `checkpoint_artifacts/iter_*`. */
export interface SavePlan {
  readonly step: number;
  readonly kind: "full" | "artifact";
  /** Logical components in table order. */
  readonly components: readonly LogicalComponent[];
  readonly reasons: readonly SaveReason[];
  readonly validation: ValidationMode;
  /**
   * An emergency `run` plan whose step already holds an artifact that does not cover it was
   * escalated to the full plan (a committed artifact is never re-committed). No accepted
   * configuration reaches this; it is a logged fallback.
   */
  readonly escalated: boolean;
}

function union(...plans: ReadonlyArray<readonly LogicalComponent[]>): LogicalComponent[] {
  return LOGICAL_COMPONENTS.filter((c) => plans.some((p) => p.includes(c)));
}

/** Whether the step's committed data already holds every component of `plan`. Pure. */
export function covers(coverage: StepCoverage | undefined, plan: readonly LogicalComponent[]): boolean {
  if (coverage === undefined) return false;
  if (coverage.full) return true;
  const artifact = coverage.artifact;
  return artifact !== undefined && plan.every((c) => artifact.includes(c));
}

/** `save_every > 0` and the loop's counter is a positive multiple of it. Pure. */
export function cadenceDue(config: Pick<ManagerConfig, "save_every">, counter: number): boolean {
  return config.save_every > 0 && counter > 0 && counter % config.save_every === 0;
}

function requireStep(step: number): void {
  if (!Number.isSafeInteger(step) || step < 0) {
    throw new ManagerError(
      "MANAGER_BAD_ARGUMENT",
      `plan save: step ${String(step)} is not an integer >= 0.`,
      {
        kind: "input",
      },
    );
  }
}

function made(
  step: number,
  components: readonly LogicalComponent[],
  reasons: SaveReason[],
  validation: ValidationMode,
  escalated = false,
): SavePlan {
  return {
    step,
    kind: isFullPlan(components) ? "full" : "artifact",
    components: [...components],
    reasons,
    validation,
    escalated,
  };
}

/**
 * Decides the one save (if any) at a step from what is due, the configuration and what the step
 * already holds (seed 001, "Logical component selection", "Pending model validation",
 * "Preemption / timeout"). Undefined means nothing is saved. Pure.
 */
export function planSave(
  config: Pick<
    ManagerConfig,
    "save_every" | "checkpoint_components" | "emergency_checkpoint_components" | "validation"
  >,
  step: number,
  due: SaveDue,
  coverage?: StepCoverage,
): SavePlan | undefined {
  requireStep(step);
  // The before-training pass of a fresh run is checkpoint-free, even under termination.
  if (due.initial) return undefined;
  const regularReasons: SaveReason[] = [];
  if (config.save_every > 0) {
    if (due.cadence) regularReasons.push("cadence");
    if (due.final) regularReasons.push("final");
  }
  const regular = regularReasons.length > 0 ? config.checkpoint_components : [];
  const validationDue = due.validation === true;
  const validationPlan =
    validationDue && config.validation.save_checkpoint ? config.validation.checkpoint_components : [];
  // Validation takes part in any save of its step: it decides the transaction even when it adds no component.
  const reasons: SaveReason[] = [...regularReasons, ...(validationDue ? (["validation"] as const) : [])];

  if (due.emergency) {
    const emergencyReasons: SaveReason[] = [...reasons, "emergency"];
    // Termination seen before a due validation: a full checkpoint that records validation pending.
    if (validationDue) {
      if (coverage?.full) return undefined;
      return made(step, FULL_PLAN, emergencyReasons, "pending");
    }
    if (config.emergency_checkpoint_components === "full") {
      return coverage?.full ? undefined : made(step, FULL_PLAN, emergencyReasons, "none");
    }
    const plan = union(runEmergencyPlan(config), regular);
    if (covers(coverage, plan)) return undefined;
    if (!isFullPlan(plan) && coverage?.artifact !== undefined) {
      return made(step, FULL_PLAN, emergencyReasons, "none", true);
    }
    return made(step, plan, emergencyReasons, "none");
  }

  const components = union(regular, validationPlan);
  if (components.length === 0) return undefined; // validation alone stays ephemeral
  if (covers(coverage, components)) return undefined; // never saved twice
  if (isFullPlan(components)) {
    return made(step, components, reasons, validationDue ? "pending" : "none");
  }
  if (regularReasons.length > 0)
    return made(step, components, reasons, validationDue ? "commit_before" : "none");
  return made(step, components, reasons, "commit_after");
}
