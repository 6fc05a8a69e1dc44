import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ArchivePublisherError, commitArtifact } from "@ckpt/archive-publisher";
import {
  type CheckpointFormat,
  fsyncDirectory,
  LATEST_POINTER,
  MULTI_ROLE_SUCCESS,
  type LogicalComponent,
  type LoopStateValue,
  sha256Hex,
  TENSOR_INVENTORY,
  writeFileAtomic,
} from "@ckpt/manifest";
import { FULL_PLAN } from "../config.js";
import { describeUnfinishedWrite, isNoSpace } from "@ckpt/errors";
import { ManagerError, messageOf, noSpace } from "../errors.js";
import {
  CHECKPOINT_DESCRIPTION_FILE,
  checkpointDescription,
  VALIDATION_STATE_FILE,
  VALIDATION_STATE_SCHEMA,
  validationRecord,
} from "../records.js";
import type { ValidationState } from "../types.js";
import {
  checkInventory,
  describeComponents,
  digestDescribed,
  fsyncDescribed,
  type InventoryEntry,
  summariseTensors,
} from "./describe.js";

export interface CommitRecord {
  /** Absolute path of the commit record (description, `_SUCCESS` or artifact manifest). */
  readonly path: string;
  readonly sha256: string;
  /** Payload bytes described. */
  readonly bytes: number;
}

/** A failed commit step; a full disk met writing `write` (a record of known size) is MANAGER_NO_SPACE. */
function commitFailed(what: string, error: unknown, write?: { path: string; bytes: number }): ManagerError {
  if (error instanceof ManagerError) return error;
  if (write !== undefined && isNoSpace(error)) {
    return noSpace(`commit: ${describeUnfinishedWrite(write.path, write.bytes)}`, write.path, error);
  }
  return new ManagerError("MANAGER_COMMIT_FAILED", `${what}: ${messageOf(error)}`, {
    kind: "failed",
    subject: what,
    cause: error,
  });
}

/** Writes a record file of the commit without fsyncing the directory (`sealDirectory` does, once). */
async function writeRecord(path: string, bytes: Uint8Array): Promise<string> {
  try {
    return (await writeFileAtomic(path, bytes, { fsyncDirectory: false })).sha256;
  } catch (error) {
    throw commitFailed(`write ${path}`, error, { path, bytes: bytes.length });
  }
}

/**
 * Describes a full (sub-)checkpoint, makes its payload durable and writes its description with
 * every file's SHA-256 (the writer's from `known`, paths relative to `dir`; the rest hashed here)
 * and each tensor file's tensor list summary, the lists themselves in the sidecar written first.
 * The directory is fsynced afterwards (`sealDirectory`), covering the payload entries and the records.
 */
async function describeAndWrite(
  dir: string,
  iteration: number,
  format: CheckpointFormat,
  producer: string,
  known: ReadonlyMap<string, string>,
): Promise<CommitRecord> {
  const described = await describeComponents(dir, iteration, format, FULL_PLAN, producer);
  await fsyncDescribed(dir, described);
  const summarised = await summariseTensors(dir, await digestDescribed(dir, described.manifest, known));
  await writeRecord(join(dir, TENSOR_INVENTORY.fileName), TENSOR_INVENTORY.serialize(summarised.inventory));
  const path = join(dir, CHECKPOINT_DESCRIPTION_FILE);
  const sha256 = await writeRecord(path, checkpointDescription.serialize(summarised.manifest));
  return { path, sha256, bytes: described.bytes };
}

async function sealDirectory(dir: string): Promise<void> {
  try {
    await fsyncDirectory(dir);
  } catch (error) {
    throw commitFailed(`fsync ${dir}`, error);
  }
}

/** Writes the validation record; `seal: false` leaves the directory fsync to the caller. */
export async function writeValidationState(
  iterDir: string,
  iteration: number,
  state: ValidationState,
  seal = true,
): Promise<void> {
  const path = join(iterDir, VALIDATION_STATE_FILE);
  const bytes = validationRecord.serialize({ schema: VALIDATION_STATE_SCHEMA, iteration, state });
  try {
    await writeFileAtomic(path, bytes, { fsyncDirectory: seal });
  } catch (error) {
    throw commitFailed(`write ${path}`, error, { path, bytes: bytes.length });
  }
}

/** Rewrites `latest_checkpoint.txt` atomically; the checkpoints root is fsynced first so the iteration's entry is durable. */
export async function writeLatestPointer(checkpointsRoot: string, iteration: number): Promise<string> {
  const path = join(checkpointsRoot, LATEST_POINTER.fileName);
  const bytes = LATEST_POINTER.serialize(iteration);
  try {
    await fsyncDirectory(checkpointsRoot);
    await writeFileAtomic(path, bytes);
    return path;
  } catch (error) {
    throw commitFailed(`write ${path}`, error, { path, bytes: bytes.length });
  }
}

export interface FullCommitRequest {
  readonly iterDir: string;
  readonly iteration: number;
  readonly format: CheckpointFormat;
  readonly producer: string;
  /** Validation pending: the record is written before the pointer, so a resume sees it. */
  readonly pending: boolean;
  readonly roles?: {
    readonly names: readonly string[];
    readonly commits: Readonly<Record<string, { readonly optimizerStep: number }>>;
    readonly loopState?: Readonly<Record<string, LoopStateValue>>;
  };
  /** The writer's digests (`CommitOptions.inventory`), paths relative to `iterDir`. */
  readonly inventory?: readonly InventoryEntry[];
}

/** The digests under `prefix` (a role's directory), re-keyed relative to it. Pure. */
function digestsUnder(digests: ReadonlyMap<string, string>, prefix: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [path, sha256] of digests)
    if (path.startsWith(prefix)) out.set(path.slice(prefix.length), sha256);
  return out;
}

/**
 * Commits a local full checkpoint whose components are written: check the writer's inventory,
 * describe and fsync everything, take each file's SHA-256 (the writer's, else hashed), write the description (each role's, then `_SUCCESS`, for a multi-role boundary) and the
 * validation record when pending. The caller writes `latest_checkpoint.txt` afterwards.
 */
export async function commitFullLocal(request: FullCommitRequest): Promise<CommitRecord> {
  const { iterDir, iteration, format, producer } = request;
  const known = await checkInventory(iterDir, request.inventory ?? []);
  let record: CommitRecord;
  if (request.roles === undefined) {
    record = await describeAndWrite(iterDir, iteration, format, producer, known);
  } else {
    let bytes = 0;
    for (const role of request.roles.names) {
      const roleDir = join(iterDir, role);
      bytes += (await describeAndWrite(roleDir, iteration, format, producer, digestsUnder(known, `${role}/`)))
        .bytes;
      await sealDirectory(roleDir);
    }
    const roles: Record<string, { optimizer_step: number }> = {};
    for (const role of request.roles.names)
      roles[role] = { optimizer_step: request.roles.commits[role]!.optimizerStep };
    const path = join(iterDir, MULTI_ROLE_SUCCESS.fileName);
    const bytesOut = MULTI_ROLE_SUCCESS.serialize({
      schema: MULTI_ROLE_SUCCESS.version,
      iteration,
      roles,
      ...(request.roles.loopState === undefined ? {} : { loop_state: { ...request.roles.loopState } }),
    });
    record = { path, sha256: await writeRecord(path, bytesOut), bytes };
  }
  if (request.pending) await writeValidationState(iterDir, iteration, "evaluation_pending", false);
  // One fsync makes the payload entries, the description (or _SUCCESS) and the record durable together.
  await sealDirectory(iterDir);
  return record;
}

/**
 * Commits a partial artifact through the publisher's commit (the same operation `ckpt artifact
 * commit` runs): payloads hashed and fsynced, native manifest written last. A committed directory
 * is refused, never re-committed; so is an incomplete DCP component (described first, as a full
 * checkpoint is).
 */
export async function commitArtifactLocal(
  dir: string,
  iteration: number,
  format: CheckpointFormat,
  plan: readonly LogicalComponent[],
  producer: string,
): Promise<CommitRecord> {
  await describeComponents(dir, iteration, format, plan, producer);
  try {
    const result = await commitArtifact(dir, { iteration, format, components: plan, producer });
    const bytes = await readFile(result.manifestPath);
    return { path: result.manifestPath, sha256: sha256Hex(bytes), bytes: result.bytes };
  } catch (error) {
    if (error instanceof ArchivePublisherError && error.code === "PUBLISH_NO_SPACE") {
      throw noSpace(`commit: ${error.message}`, error.subject ?? dir, error);
    }
    if (error instanceof ArchivePublisherError) {
      const code =
        error.code === "PUBLISH_ALREADY_COMMITTED"
          ? "MANAGER_ARTIFACT_COMMITTED"
          : error.code === "COMMIT_COMPONENT_MISSING"
            ? "MANAGER_COMPONENT_MISSING"
            : error.code === "COMMIT_COMPONENT_CONFLICT"
              ? "MANAGER_COMPONENT_CONFLICT"
              : "MANAGER_COMMIT_FAILED";
      throw new ManagerError(code, error.message, {
        kind: error.kind === "input" ? "refused" : error.kind,
        ...(error.subject ? { subject: error.subject } : {}),
        cause: error,
      });
    }
    throw commitFailed(`commit ${dir}`, error);
  }
}
