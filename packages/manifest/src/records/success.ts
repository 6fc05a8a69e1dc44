import { z } from "zod";
import { codedIssue, iterationSchema, recordApi } from "./common.js";
import { MULTI_ROLE_SUCCESS_FILE } from "./names.js";

export const MULTI_ROLE_SUCCESS_VERSION = "posttrain.multi-role-boundary.v1";
/** Most roles in one boundary: PPO has two (policy, critic); this bounds a crafted marker. */
const MAX_ROLES = 64;
/** Most loop_state entries: loops store a handful of settings there. */
const MAX_LOOP_STATE_ENTRIES = 256;
/** Longest loop_state key or string value. */
const MAX_LOOP_STATE_TEXT = 4096;

/** A role name is also its sub-directory name, so it is one safe path segment. */
const roleNameSchema = z.string().superRefine((value, ctx) => {
  if (!/^[a-z][a-z0-9_]{0,63}$/.test(value)) {
    codedIssue(ctx, "RECORD_INVALID_VALUE", "a role name is 1-64 of [a-z0-9_], starting with a letter");
  }
});

const roleCommitSchema = z.strictObject({
  /** The optimizer counter this role committed at the boundary. */
  optimizer_step: iterationSchema,
});

/** A JSON scalar a loop stores verbatim in loop_state. */
const loopStateValueSchema = z.union([
  z.string().max(MAX_LOOP_STATE_TEXT),
  z.number(),
  z.boolean(),
  z.null(),
]);
export type LoopStateValue = z.infer<typeof loopStateValueSchema>;

const multiRoleSuccessSchema = z
  .strictObject({
    schema: z.literal(MULTI_ROLE_SUCCESS_VERSION),
    /** The loop's outer iteration (the iter_* number), not any role's optimizer counter. */
    iteration: iterationSchema,
    roles: z.record(roleNameSchema, roleCommitSchema),
    /** Opaque settings of the committing loop, returned verbatim on resume; never interpreted here. */
    loop_state: z.record(z.string().min(1).max(MAX_LOOP_STATE_TEXT), loopStateValueSchema).optional(),
  })
  .superRefine((m, ctx) => {
    const roles = Object.keys(m.roles).length;
    if (roles === 0 || roles > MAX_ROLES) {
      codedIssue(ctx, "RECORD_WRONG_COUNT", `a boundary has 1 to ${MAX_ROLES} roles, not ${roles}`, [
        "roles",
      ]);
    }
    if (m.loop_state !== undefined && Object.keys(m.loop_state).length > MAX_LOOP_STATE_ENTRIES) {
      codedIssue(ctx, "RECORD_WRONG_COUNT", `loop_state has more than ${MAX_LOOP_STATE_ENTRIES} entries`, [
        "loop_state",
      ]);
    }
  });

/** The `_SUCCESS` marker committing a multi-role (e.g. PPO policy + critic) boundary. */
export type MultiRoleSuccess = z.infer<typeof multiRoleSuccessSchema>;

export const MULTI_ROLE_SUCCESS = recordApi<MultiRoleSuccess, typeof MULTI_ROLE_SUCCESS_VERSION>({
  title: "multi-role boundary marker",
  fileName: MULTI_ROLE_SUCCESS_FILE,
  versionField: "schema",
  versions: [MULTI_ROLE_SUCCESS_VERSION],
  schema: multiRoleSuccessSchema,
});
