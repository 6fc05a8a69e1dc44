import { readdir, rm } from "node:fs/promises";
import { describeUnfinishedWrite, isNoSpace } from "@ckpt/errors";
import { basename, dirname, join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  MERGE_COMPLETE,
  describeLockHolder,
  type FileDigest,
  fsyncDirectory,
  type HeldLock,
  hashFiles,
  lockDirectory,
  type MergeComplete,
  ManifestError,
  type Ownership,
  parseStrictJson,
  decideSwapRecovery,
  pathKind,
  type PathKind,
  readBoundedFile,
  readOwnership,
  recoverSwap,
  removeOwnedDirectory,
  type StagedPaths,
  type SwapIo,
  swapIntoPlace as swapStagedIntoPlace,
} from "@ckpt/manifest";
import type { CompletionRead, ManifestRead, OutputFacts, RecordRead } from "../decide.js";
import { MergeError } from "../errors.js";
import { noSpace } from "./space.js";

/**
 * A build happens in a hidden sibling of the artifact directory and is swapped in whole
 * (@ckpt/manifest's staged directory: a crash leaves the old directory or the new one).
 */
export function sidePaths(iterDir: string): StagedPaths & { lock: string } {
  const parent = dirname(iterDir);
  const name = basename(iterDir);
  return {
    final: iterDir,
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
      if (isNoSpace(outcome.error)) {
        throw noSpace(describeUnfinishedWrite(lockDir, 0), lockDir, outcome.error);
      }
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
    return { status: "ok", value: MERGE_COMPLETE.parse(read.value, path) };
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
    return { status: "ok", value: ARTIFACT_MANIFEST.parse(read.value, path) };
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
  const kind = await pathKind(iterDir);
  if (kind !== "absent" && kind !== "dir") {
    throw new MergeError(
      "MERGE_BAD_OUT_PATH",
      `merge: ${iterDir} exists and is not a directory. Remove it or choose another --out.`,
      { kind: "input", file: iterDir },
    );
  }
  if (kind === "absent") {
    return { exists: false, entries: [], completion: { status: "absent" }, manifest: { status: "absent" } };
  }
  return {
    exists: true,
    entries: (await readdir(iterDir)).sort(),
    completion: await readCompletion(join(iterDir, MERGE_COMPLETE.fileName)),
    manifest: await readManifest(join(iterDir, ARTIFACT_MANIFEST.fileName)),
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
  for (const path of paths) if ((await pathKind(join(iterDir, path))) !== "absent") present.push(path);
  const digests = await hashFiles(present.map((p) => join(iterDir, p)));
  return new Map(paths.map((p) => [p, digests.get(join(iterDir, p))]));
}

/**
 * The ownership rule (issue 16) for a merge's side directory: it holds only the plain files a
 * merge writes, and its completion record, when there is one, parses and validates as this tool's
 * (a build killed before writing it leaves none; atomic writes never leave a torn one).
 */
async function sideOwnership(dir: string): Promise<Ownership> {
  const names = await readdir(dir);
  for (const name of names) {
    if ((await pathKind(join(dir, name))) !== "file")
      return { owned: false, reason: `it holds ${name}, which is not a plain file a merge writes` };
  }
  if (!names.includes(MERGE_COMPLETE.fileName)) return { owned: true, record: undefined };
  return readOwnership(dir, MERGE_COMPLETE.fileName, MERGE_COMPLETE.parse);
}

function foreignSide(dir: string, reason: string): MergeError {
  return new MergeError(
    "MERGE_FOREIGN_FILES",
    `merge: ${dir} (a merge's own staging name): ${reason}. Move it elsewhere; nothing was changed.`,
    { kind: "refused", file: dir },
  );
}

/** Removes a directory only this tool writes (staging or previous); anything else is refused untouched. */
function removeOwnDirectory(dir: string): Promise<void> {
  return removeOwnedDirectory(dir, { ownership: sideOwnership, refuse: foreignSide });
}

/**
 * A file, symbolic link, FIFO or socket at a merge's own side name: never followed, replaced or
 * removed (issue 16), whether found before a build or met by its `mkdir`.
 */
export function sideNameOccupied(side: string, kind: PathKind): MergeError {
  const what =
    kind === "file" ? "a file" : kind === "dir" ? "a directory" : "a symbolic link, FIFO or socket";
  return new MergeError(
    "MERGE_FOREIGN_FILES",
    `merge: ${side} (a merge's own staging name) is ${what}, not a merge's directory. ` +
      "Move it elsewhere; nothing was followed or changed.",
    { kind: "refused", file: side },
  );
}

export type RecoveryAction = "finished-swap" | "undid-swap" | "removed-previous" | "removed-staging";

/**
 * Brings the output back to one whole directory after a crash: between the swap's two renames the
 * staged build (complete, or it would not have been swapped) is moved into place, or, if it is
 * not usable, the previous directory is put back; leftovers of a finished swap or an abandoned
 * build are removed.
 */
export async function recoverInterruptedSwap(iterDir: string): Promise<RecoveryAction[]> {
  const paths = sidePaths(iterDir);
  const { staging, previous } = paths;
  const actions: RecoveryAction[] = [];
  // Checked before any rename, so a foreign look-alike is never moved into the artifact's place.
  for (const side of [previous, staging]) {
    const kind = await pathKind(side);
    if (kind === "file" || kind === "other") throw sideNameOccupied(side, kind);
    if (kind === "dir") {
      const ownership = await sideOwnership(side);
      if (!ownership.owned) throw foreignSide(side, ownership.reason);
    }
  }
  const final = await pathKind(iterDir);
  const previousKind = await pathKind(previous);
  const step = decideSwapRecovery({
    final,
    previous: previousKind,
    stagingComplete:
      final === "absent" &&
      previousKind === "dir" &&
      (await pathKind(staging)) === "dir" &&
      (await readRecord(join(staging, MERGE_COMPLETE.fileName), MERGE_COMPLETE.parse)).status === "ok",
  });
  await recoverSwap(paths, step);
  if (step !== "none") actions.push(step === "finish" ? "finished-swap" : "undid-swap");
  if ((await pathKind(previous)) === "dir") {
    await removeOwnDirectory(previous);
    actions.push("removed-previous");
  }
  if ((await pathKind(staging)) === "dir") {
    await removeOwnDirectory(staging);
    actions.push("removed-staging");
  }
  return actions;
}

/** Puts a finished staging directory in place of the artifact directory (see {@link sidePaths}). */
export async function swapIntoPlace(iterDir: string, io?: SwapIo): Promise<void> {
  const parent = dirname(iterDir);
  await swapStagedIntoPlace(
    sidePaths(iterDir),
    async (previous) => {
      await rm(previous, { recursive: true, force: true });
      await fsyncDirectory(parent);
    },
    io,
  );
}
