import { lstat, readdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { publishArtifact, uploadFullCheckpoint } from "@ckpt/archive-publisher";
import { artifactPayloadFiles, artifactPrefixFor, checkpointPrefixFor } from "@ckpt/manifest";
import {
  applyRetentionPlan,
  type CheckpointInfo,
  planModelRetention,
  planOptimizerRetention,
  type RetentionPlan,
  scanCheckpointRoot,
} from "@ckpt/retention";
import type { ManagerConfig } from "./config.js";
import { messageOf } from "./errors.js";
import { entryKind, removeOwned } from "./internal/fs.js";
import { bucketUri, joinUri, openAt, type StoreAccess } from "./internal/store.js";
import {
  CHECKPOINT_DESCRIPTION_FILE,
  checkpointDescription,
  VALIDATION_STATE_FILE,
  validationRecord,
} from "./records.js";
import type { RetentionOutcome, UploadOutcome } from "./types.js";

/** Where a (role's) optimizer state lives: a consolidated file or a directory of DCP shards. */
const OPTIMIZER_FORMS = ["optim.pt", "optim"] as const;
/** Bulk payloads are not hashed on the training path (seed 001, upload markers); everything small is. */
const BULK = /(^|\/)(model|optim|old|ref)(\.pt$|\/)/;

function failure(error: unknown): UploadOutcome["error"] {
  return {
    code: (error as { code?: unknown })?.code?.toString() ?? "UPLOAD_FAILED",
    message: messageOf(error),
  };
}

/** Where the archive of `iteration` goes: the full checkpoint prefix, or the sibling artifact prefix. Pure. */
export function archiveUri(
  upload: ManagerConfig["upload"],
  uploadPrefix: string,
  kind: "full" | "artifact",
  iteration: number,
): string {
  const prefix =
    kind === "full"
      ? checkpointPrefixFor(uploadPrefix, iteration)
      : artifactPrefixFor(uploadPrefix, iteration);
  return joinUri(bucketUri(upload.bucket), prefix);
}

/**
 * The digests the commit recorded in the checkpoint's description (each role's, for a multi-role
 * boundary), by path relative to `iterDir`; none for a checkpoint committed without one.
 */
async function recordedDigests(
  iterDir: string,
  roles: readonly string[],
): Promise<Map<string, { size: number; sha256: string }>> {
  const recorded = new Map<string, { size: number; sha256: string }>();
  for (const prefix of roles.length === 0 ? [""] : roles.map((role) => `${role}/`)) {
    const path = join(iterDir, prefix, CHECKPOINT_DESCRIPTION_FILE);
    if ((await entryKind(path)) === "absent") continue;
    for (const file of artifactPayloadFiles(await checkpointDescription.read(path))) {
      if (file.sha256 !== undefined)
        recorded.set(`${prefix}${file.path}`, { size: file.size, sha256: file.sha256 });
    }
  }
  return recorded;
}

/**
 * Uploads a completed full checkpoint to its archive prefix and writes its `.uploaded` receipt
 * (idempotent, same-size skip). Payloads are uploaded on the digests their description records,
 * each byte read once and re-hashed on the way. Never throws: the outcome says what happened.
 */
export async function archiveFullCheckpoint(
  iterDir: string,
  uri: string,
  access: StoreAccess,
  roles: readonly string[],
): Promise<UploadOutcome> {
  try {
    const store = await openAt(uri, access);
    await uploadFullCheckpoint(iterDir, store, {
      hash: (path) => !BULK.test(path),
      recorded: await recordedDigests(iterDir, roles),
    });
    return { status: "uploaded", uri };
  } catch (error) {
    return { status: "failed", uri, error: failure(error) };
  }
}

/**
 * Publishes a committed artifact through the same operation as `ckpt artifact publish`
 * (declaration, verified payloads, manifest last, receipt). Never throws.
 */
export async function archiveArtifact(dir: string, uri: string, access: StoreAccess): Promise<UploadOutcome> {
  try {
    const store = await openAt(uri, access);
    await publishArtifact(dir, store);
    return { status: "uploaded", uri };
  } catch (error) {
    return { status: "failed", uri, error: failure(error) };
  }
}

/** Whether an iteration directory is inside an unfinished validation transaction. */
async function validationOpen(dir: string): Promise<boolean> {
  const path = join(dir, VALIDATION_STATE_FILE);
  if ((await entryKind(path)) === "absent") return false;
  try {
    return (await validationRecord.read(path)).state !== "published";
  } catch {
    return true; // an unreadable record keeps its checkpoint
  }
}

/**
 * The checkpoints retention may count: committed ones only (at or before the latest pointer; a
 * directory beyond it is a save in progress or an interrupted one) and none with an open
 * validation transaction (not retained until published). Pure over the scanned infos.
 */
export function retentionCandidates(
  infos: readonly CheckpointInfo[],
  latest: number | undefined,
  open: ReadonlySet<number>,
): CheckpointInfo[] {
  if (latest === undefined) return [];
  return infos.filter((info) => info.iteration <= latest && !open.has(info.iteration));
}

async function candidates(root: string): Promise<CheckpointInfo[]> {
  const infos = await scanCheckpointRoot(root);
  const latest = infos.find((i) => i.isLatest)?.iteration;
  const open = new Set<number>();
  for (const info of infos) if (await validationOpen(info.dir)) open.add(info.iteration);
  return retentionCandidates(infos, latest, open);
}

/** Bytes of a file or directory tree (0 when absent). */
async function bytesOf(path: string): Promise<number> {
  const info = await lstat(path).catch(() => undefined);
  if (info === undefined) return 0;
  if (!info.isDirectory()) return info.isFile() ? info.size : 0;
  let total = 0;
  for (const name of await readdir(path)) total += await bytesOf(join(path, name));
  return total;
}

/**
 * The same candidates seen through one role of a multi-role boundary: a role's optimizer state
 * is `<iter>/<role>/optim.pt` or `<iter>/<role>/optim/`. Each role is counted on its own, because
 * the roles step their optimizers independently (seed 001, multi-role boundary).
 */
async function roleView(infos: readonly CheckpointInfo[], role: string): Promise<CheckpointInfo[]> {
  const out: CheckpointInfo[] = [];
  for (const info of infos) {
    const kinds = await Promise.all(OPTIMIZER_FORMS.map((form) => entryKind(join(info.dir, role, form))));
    out.push({ ...info, hasOptimizer: kinds.some((k) => k !== "absent") });
  }
  return out;
}

/**
 * `keep_optim_last` inside a multi-role boundary: per role, the optimizer state of all but the
 * newest N iterations holding it is removed (renamed aside, parent fsynced); weights, trainer
 * state and `_SUCCESS` stay. The iteration the pointer names is never touched.
 */
async function retainRoleOptimizers(
  infos: readonly CheckpointInfo[],
  roles: readonly string[],
  options: { keepLast: number; requireUploaded: boolean },
  removed: string[],
  errors: string[],
): Promise<number> {
  const latest = infos.find((i) => i.isLatest)?.iteration;
  let freed = 0;
  for (const role of roles) {
    const plan = planOptimizerRetention(await roleView(infos, role), options);
    for (const removal of plan.remove) {
      if (removal.iteration === latest) continue;
      for (const form of OPTIMIZER_FORMS) {
        const path = join(removal.dir, role, form);
        try {
          const bytes = await bytesOf(path);
          if (await removeOwned(path)) {
            removed.push(`${basename(removal.dir)}/${role}/${form}`);
            freed += bytes;
          }
        } catch (error) {
          errors.push(`remove ${path}: ${messageOf(error)}. Check permissions; the next save retries.`);
        }
      }
    }
  }
  return freed;
}

/**
 * Local retention after a save, in the save's write job: `keep_model_last` removes whole
 * iteration directories beyond the newest N, then `keep_optim_last` removes optimizer state from
 * all but the newest N that still hold it (per role inside a multi-role boundary); with upload
 * enabled only archived ones (`.uploaded`). Never throws: failures are reported in the outcome.
 */
export async function applyLocalRetention(
  checkpointsRoot: string,
  config: Pick<ManagerConfig, "keep_model_last" | "keep_optim_last" | "upload" | "roles">,
): Promise<RetentionOutcome | undefined> {
  if (config.keep_model_last === 0 && config.keep_optim_last === 0) return undefined;
  const requireUploaded = config.upload.enabled;
  const removed: string[] = [];
  const errors: string[] = [];
  let freedBytes = 0;
  const apply = async (plan: RetentionPlan) => {
    const report = await applyRetentionPlan(plan, { root: checkpointsRoot });
    for (const r of report.removed) removed.push(...r.paths);
    for (const e of report.errors) errors.push(e.message);
    freedBytes += report.freed_bytes;
  };
  try {
    if (config.keep_model_last > 0) {
      await apply(
        planModelRetention(await candidates(checkpointsRoot), {
          keepLast: config.keep_model_last,
          requireUploaded,
        }),
      );
    }
    if (config.keep_optim_last > 0 && config.roles.length > 0) {
      freedBytes += await retainRoleOptimizers(
        await candidates(checkpointsRoot),
        config.roles,
        { keepLast: config.keep_optim_last, requireUploaded },
        removed,
        errors,
      );
    } else if (config.keep_optim_last > 0) {
      await apply(
        planOptimizerRetention(await candidates(checkpointsRoot), {
          keepLast: config.keep_optim_last,
          requireUploaded,
        }),
      );
    }
  } catch (error) {
    errors.push(messageOf(error));
  }
  return { removed, freedBytes, errors };
}
