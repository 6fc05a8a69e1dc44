import { lstat, readdir, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import {
  ARTIFACT_MANIFEST_FILE,
  describeLockHolder,
  type FileDigest,
  fsyncDirectory,
  type HeldLock,
  hashFiles,
  lockDirectory,
  MERGE_COMPLETE_FILE,
  type MergeComplete,
  ManifestError,
  parseArtifactManifest,
  parseMergeComplete,
  parseStrictJson,
  readBoundedFile,
} from "@ckpt/manifest";
import type { CompletionRead, ManifestRead, OutputFacts, RecordRead } from "../decide.js";
import { MergeError } from "../errors.js";

/**
 * A build happens in a hidden sibling of the artifact directory and is swapped in whole, so a
 * crash leaves the old directory or the new one (between the two renames of the swap, the old one
 * waits under `previous` and the next run finishes or undoes the swap).
 */
export function sidePaths(iterDir: string): { staging: string; previous: string; lock: string } {
  const parent = dirname(iterDir);
  const name = basename(iterDir);
  return {
    staging: join(parent, `.${name}.merge-staging`),
    previous: join(parent, `.${name}.merge-previous`),
    lock: join(parent, `.${name}.merge.lock`),
  };
}

/** A killed merger's lock goes stale after this long when it ran on another host. */
const LOCK_STALE_MS = 10_000;

/**
 * Takes the output's lock (@ckpt/manifest's lockDirectory), so two merges into one artifact never
 * remove each other's staging or swap over each other. Waits `waitMs` for a live holder.
 */
export async function lockOutput(iterDir: string, waitMs: number, signal?: AbortSignal): Promise<HeldLock> {
  const { lock: lockDir } = sidePaths(iterDir);
  const outcome = await lockDirectory({
    lockDir,
    holderFields: { tool: "ckpt merge" },
    staleMs: LOCK_STALE_MS,
    waitMs,
    ...(signal === undefined ? {} : { signal }),
  });
  switch (outcome.status) {
    case "held":
      return outcome.lock;
    case "busy":
      throw new MergeError(
        "MERGE_OUTPUT_LOCKED",
        `merge into ${iterDir}: ${lockDir} is held by ${describeLockHolder(outcome.holder)}: another merge is writing this artifact. ` +
          "Wait for it (or raise --lock-wait-seconds); a killed holder's lock is cleared by the next run on its host.",
        { kind: "refused", file: lockDir },
      );
    case "aborted":
      throw new MergeError("MERGE_ABORTED", `merge into ${iterDir}: aborted while waiting for ${lockDir}.`, {
        kind: "failed",
      });
    case "failed":
      throw new MergeError(
        "MERGE_OUTPUT_LOCKED",
        `merge into ${iterDir}: cannot take ${lockDir}: ${String(outcome.error)}`,
        {
          kind: "failed",
          file: lockDir,
          cause: outcome.error,
        },
      );
  }
}

/** Refuses to publish when the lock was taken from this merge (it stalled past the stale time). */
export function assertLockHeld(lock: HeldLock, iterDir: string): void {
  const lost = lock.lost();
  if (lost !== undefined) {
    throw new MergeError(
      "MERGE_OUTPUT_LOCKED",
      `merge into ${iterDir}: this merge lost its lock ${lock.path} (${lost.message}); another merge may own the artifact now. Nothing was published; re-run.`,
      { kind: "failed", file: lock.path, cause: lost },
    );
  }
}

async function kindOf(path: string): Promise<"absent" | "dir" | "other"> {
  try {
    return (await lstat(path)).isDirectory() ? "dir" : "other";
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "absent";
    throw error;
  }
}

async function readRecord<T>(
  path: string,
  parse: (bytes: Uint8Array, name: string) => T,
): Promise<RecordRead<T>> {
  try {
    return { status: "ok", value: parse(await readBoundedFile(path), path) };
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    if (error.code === "RECORD_NOT_FOUND") return { status: "absent" };
    return { status: "invalid", code: error.code, message: error.message };
  }
}

/** Decodes bytes that failed a record's schema as JSON; undefined when they are not a JSON object. */
function looseJsonObject(bytes: Uint8Array, path: string): Record<string, unknown> | undefined {
  try {
    const json = parseStrictJson(new TextDecoder("utf-8", { fatal: true }).decode(bytes), { name: path });
    return typeof json === "object" && json !== null && !Array.isArray(json)
      ? (json as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The completion record. One that is a JSON object but not this schema was written by another
 * version of the tool (atomic writes never leave a torn record), so it is not treated as damage.
 */
async function readCompletion(path: string): Promise<CompletionRead> {
  const read = await readRecord(path, (bytes) => bytes);
  if (read.status !== "ok") return read;
  try {
    return { status: "ok", value: parseMergeComplete(read.value, path) };
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    const json = looseJsonObject(read.value, path);
    if (json === undefined) return { status: "invalid", code: error.code, message: error.message };
    const label = [json.tool_version, json.tool, json.schema].find((v) => typeof v === "string");
    return {
      status: "unrecognised",
      label: typeof label === "string" ? label.slice(0, 80) : "an unrecognised completion record",
    };
  }
}

/**
 * The native manifest, recognising the retired merge tool's record (a `tool` field where the
 * native schema has `schema`) without converting it: that is the publisher's job.
 */
async function readManifest(path: string): Promise<ManifestRead> {
  const read = await readRecord(path, (bytes) => bytes);
  if (read.status !== "ok") return read;
  try {
    return { status: "ok", value: parseArtifactManifest(read.value, path) };
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    const json = looseJsonObject(read.value, path);
    if (typeof json?.tool === "string" && !("schema" in json))
      return { status: "legacy-merge", tool: json.tool };
    return { status: "invalid", code: error.code, message: error.message };
  }
}

/** What is at the artifact directory: its entries and its two records (never the payload bytes). */
export async function readOutputFacts(iterDir: string): Promise<OutputFacts> {
  const kind = await kindOf(iterDir);
  if (kind === "other") {
    throw new MergeError(
      "MERGE_BAD_OUT_PATH",
      `merge: ${iterDir} exists and is not a directory. Remove it or choose another --out.`,
      { file: iterDir },
    );
  }
  if (kind === "absent") {
    return { exists: false, entries: [], completion: { status: "absent" }, manifest: { status: "absent" } };
  }
  return {
    exists: true,
    entries: (await readdir(iterDir)).sort(),
    completion: await readCompletion(join(iterDir, MERGE_COMPLETE_FILE)),
    manifest: await readManifest(join(iterDir, ARTIFACT_MANIFEST_FILE)),
  };
}

/** Size and digest of every file a completion record names (absent ones map to undefined). */
export async function digestRecordedFiles(
  iterDir: string,
  record: MergeComplete,
): Promise<Map<string, FileDigest | undefined>> {
  const paths = record.files.map((f) => f.path);
  if (record.diagnostics?.location === "artifact") paths.push(record.diagnostics.path);
  const present: string[] = [];
  for (const path of paths) if ((await kindOf(join(iterDir, path))) !== "absent") present.push(path);
  const digests = await hashFiles(present.map((p) => join(iterDir, p)));
  return new Map(paths.map((p) => [p, digests.get(join(iterDir, p))]));
}

/** Removes a directory only this tool writes (staging or previous): it must hold regular files only. */
async function removeOwnDirectory(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    if (!(await lstat(join(dir, name))).isFile()) {
      throw new MergeError(
        "MERGE_FOREIGN_FILES",
        `merge: ${dir} (a merge's own staging name) holds ${name}, which is not a plain file a merge writes. Move it elsewhere; nothing was changed.`,
        { kind: "refused", file: dir },
      );
    }
  }
  await rm(dir, { recursive: true, force: true });
}

export type RecoveryAction = "finished-swap" | "undid-swap" | "removed-previous" | "removed-staging";

/**
 * Brings the output back to one whole directory after a crash: between the swap's two renames the
 * staged build (complete, or it would not have been swapped) is moved into place, or, if it is
 * not usable, the previous directory is put back; leftovers of a finished swap or an abandoned
 * build are removed.
 */
export async function recoverInterruptedSwap(iterDir: string): Promise<RecoveryAction[]> {
  const { staging, previous } = sidePaths(iterDir);
  const parent = dirname(iterDir);
  const actions: RecoveryAction[] = [];
  if ((await kindOf(previous)) === "dir" && (await kindOf(iterDir)) === "absent") {
    const staged =
      (await kindOf(staging)) === "dir"
        ? await readRecord(join(staging, MERGE_COMPLETE_FILE), parseMergeComplete)
        : undefined;
    if (staged?.status === "ok") {
      await rename(staging, iterDir);
      actions.push("finished-swap");
    } else {
      await rename(previous, iterDir);
      actions.push("undid-swap");
    }
    await fsyncDirectory(parent);
  }
  if ((await kindOf(previous)) === "dir") {
    await removeOwnDirectory(previous);
    actions.push("removed-previous");
  }
  if ((await kindOf(staging)) === "dir") {
    await removeOwnDirectory(staging);
    actions.push("removed-staging");
  }
  if (actions.length > 0) await fsyncDirectory(parent);
  return actions;
}

/** Puts a finished staging directory in place of the artifact directory (see {@link sidePaths}). */
export async function swapIntoPlace(iterDir: string): Promise<void> {
  const { staging, previous } = sidePaths(iterDir);
  const parent = dirname(iterDir);
  await fsyncDirectory(staging);
  if ((await kindOf(iterDir)) === "dir") {
    await rename(iterDir, previous);
    await rename(staging, iterDir);
    await fsyncDirectory(parent);
    await rm(previous, { recursive: true, force: true });
  } else {
    await rename(staging, iterDir);
  }
  await fsyncDirectory(parent);
}
