import { join } from "node:path";
import { publishArtifact, uploadFullCheckpoint } from "@ckpt/archive-publisher";
import { artifactPrefixFor, checkpointPrefixFor } from "@ckpt/manifest";
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
import { entryKind } from "./internal/fs.js";
import { bucketUri, joinUri, openAt, type StoreAccess } from "./internal/store.js";
import { VALIDATION_STATE_FILE, validationRecord } from "./records.js";
import type { RetentionOutcome, UploadOutcome } from "./types.js";

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
 * Uploads a completed full checkpoint to its archive prefix and writes its `.uploaded` receipt
 * (idempotent, same-size skip). Never throws: the outcome says what happened.
 */
export async function archiveFullCheckpoint(
  iterDir: string,
  uri: string,
  access: StoreAccess,
): Promise<UploadOutcome> {
  try {
    const store = await openAt(uri, access);
    await uploadFullCheckpoint(iterDir, store, { hash: (path) => !BULK.test(path) });
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

/**
 * Local retention after a save, in the save's write job: `keep_model_last` removes whole
 * iteration directories beyond the newest N, then `keep_optim_last` removes optimizer state from
 * all but the newest N that still hold it; with upload enabled only archived ones (`.uploaded`).
 * Never throws: failures are reported in the outcome.
 */
export async function applyLocalRetention(
  checkpointsRoot: string,
  config: Pick<ManagerConfig, "keep_model_last" | "keep_optim_last" | "upload">,
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
    if (config.keep_optim_last > 0) {
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
