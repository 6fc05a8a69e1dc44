import { mkdir, readdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { CHECKPOINT_ARTIFACTS_DIR, CHECKPOINTS_DIR, isRunTs, parseIterDir } from "@ckpt/manifest";
import { ManagerError, messageOf } from "./errors.js";
import { entryKind } from "./internal/fs.js";
import { bucketUri, joinUri, openAt, type StoreAccess } from "./internal/store.js";
import {
  type AttemptDecision,
  decideAttempt,
  defaultPrefixFor,
  RESUME_CACHE_DIR,
  refuseLegacyFresh,
  STAGING_DIR,
} from "./layout.js";
import { latestIteration } from "./local/prepare.js";
import { LocalPrimary } from "./local/primary.js";
import { WriterLock } from "./local/writer-lock.js";
import type { Primary } from "./primary.js";
import { DirectPrimary } from "./remote/direct.js";
import { WriterLease } from "./remote/lease.js";
import type { ManagerEvent, OpenOptions } from "./types.js";

/** How long a second writer waits for the attempt's writer lock before it is refused (a holder that is exiting). */
const DEFAULT_WRITER_LOCK_WAIT_MS = 5000;

type Run = { project: string; group: string; name: string };

/** A claimed run attempt and the primary its checkpoints are committed to. */
export interface OpenedAttempt {
  readonly attempt: AttemptDecision;
  readonly primary: Primary;
  /** Credentials and timeout for every store the manager opens (archive, an explicit `s3://` resume). */
  readonly access: StoreAccess;
}

async function runTsDirs(nameDir: string): Promise<string[]> {
  try {
    const entries = await readdir(nameDir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && isRunTs(e.name)).map((e) => e.name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}

/**
 * Resolves the run attempt (a given RUN_TS, the legacy flat layout, a sibling for `resume=off`,
 * else the newest attempt, minting one at the first launch), claims it on rank 0 (creates it; a
 * local primary takes its writer lock, a direct primary its store lease) and opens its primary.
 */
export async function openAttempt(
  options: OpenOptions,
  producer: string,
  emit: (event: ManagerEvent) => void,
): Promise<OpenedAttempt> {
  const { config } = options;
  const rank = options.rank ?? 0;
  if (!Number.isSafeInteger(rank) || rank < 0) {
    throw new ManagerError(
      "MANAGER_BAD_ARGUMENT",
      `open checkpoint manager: rank ${String(rank)} is not an integer >= 0.`,
      { kind: "input" },
    );
  }
  const clock = options.clock ?? (() => new Date());
  const outputRoot = resolve(options.outputRoot);
  const run = { project: options.project, group: options.group, name: options.name };
  const nameDir = join(outputRoot, run.project, run.group, run.name);
  const attempt = decideAttempt({
    outputRoot,
    ...run,
    configRunTs: config.run_ts,
    ...(options.runTs === undefined ? {} : { givenRunTs: options.runTs }),
    resume: config.resume,
    rank,
    existingRunTs: await runTsDirs(nameDir),
    legacyFlat: (await entryKind(join(nameDir, CHECKPOINTS_DIR))) === "dir",
    now: clock(),
  });
  if (attempt.layout === "legacy" && config.resume === "off") {
    const root = join(attempt.attemptDir, CHECKPOINTS_DIR);
    refuseLegacyFresh(attempt, config.resume, {
      latest: await latestIteration(root),
      iterDirs: (await readdir(root)).filter((n) => parseIterDir(n) !== undefined),
    });
  }
  // A direct primary's writer guard is its lease on the store; the local lock guards a local attempt.
  const writerLock =
    rank === 0
      ? await claimAttempt(attempt, options, config.checkpoint_store.backend === "local")
      : undefined;
  try {
    const access = storeAccess(options);
    const context = { options, attempt, run, producer, access, emit };
    const primary =
      config.checkpoint_store.backend === "object_store"
        ? await openDirectPrimary(context)
        : new LocalPrimary({
            attempt,
            checkpointsRoot: join(attempt.attemptDir, CHECKPOINTS_DIR),
            config,
            producer,
            uploadPrefix: (config.upload.prefix || defaultPrefixFor(attempt, run)).replace(/\/+$/, ""),
            access,
            writerLock,
            emit,
          });
    return { attempt, primary, access };
  } catch (error) {
    await writerLock?.release();
    throw error;
  }
}

/** Rank 0: creates the attempt directory and (local primary) takes its writer lock. */
async function claimAttempt(
  attempt: AttemptDecision,
  options: OpenOptions,
  lock: boolean,
): Promise<WriterLock | undefined> {
  try {
    await mkdir(attempt.attemptDir, { recursive: true });
  } catch (error) {
    throw new ManagerError(
      "MANAGER_LAYOUT_FAILED",
      `create run attempt ${attempt.attemptDir}: ${messageOf(error)}`,
      {
        kind: "failed",
        subject: attempt.attemptDir,
        cause: error,
      },
    );
  }
  if (!lock) return undefined;
  return WriterLock.acquire(
    attempt.attemptDir,
    attempt.runTs,
    options.writerLockWaitMs ?? DEFAULT_WRITER_LOCK_WAIT_MS,
  );
}

/** The primary store's credentials (else the upload's) and the store timeout. */
function storeAccess(options: OpenOptions): StoreAccess {
  const { config } = options;
  const credentials =
    options.credentials ??
    (config.checkpoint_store.backend === "object_store"
      ? config.checkpoint_store.credentials
      : config.upload.credentials);
  return {
    ...(credentials === "" || credentials === undefined ? {} : { credentials }),
    ...(options.storeTimeoutMs === undefined ? {} : { timeoutMs: options.storeTimeoutMs }),
  };
}

/**
 * Opens the checkpoints prefix (and its sibling `checkpoint_artifacts` prefix when the prefix is
 * a checkpoints root) and, on rank 0, acquires and renews the writer lease.
 */
async function openDirectPrimary(context: {
  options: OpenOptions;
  attempt: AttemptDecision;
  run: Run;
  producer: string;
  access: StoreAccess;
  emit: (event: ManagerEvent) => void;
}): Promise<DirectPrimary> {
  const { options, attempt, run, access, emit } = context;
  const { config } = options;
  const clock = options.clock ?? (() => new Date());
  const prefix = (config.checkpoint_store.prefix || defaultPrefixFor(attempt, run)).replace(/\/+$/, "");
  const bucket = bucketUri(config.checkpoint_store.bucket);
  const root = await openAt(joinUri(bucket, prefix), access);
  const isCheckpointsRoot = prefix === CHECKPOINTS_DIR || prefix.endsWith(`/${CHECKPOINTS_DIR}`);
  const artifacts = isCheckpointsRoot
    ? await openAt(
        joinUri(
          bucket,
          `${prefix.slice(0, prefix.length - CHECKPOINTS_DIR.length)}${CHECKPOINT_ARTIFACTS_DIR}`,
        ),
        access,
      )
    : undefined;
  let lease: WriterLease | undefined;
  if ((options.rank ?? 0) === 0) {
    lease = await WriterLease.acquire(
      root,
      WriterLease.newHolder(attempt.runTs),
      config.checkpoint_store.lease_seconds * 1000,
      clock,
      (action, key) => emit({ type: "lease", action, key }),
    );
    lease.startRenewing();
  }
  return new DirectPrimary({
    root,
    artifacts,
    stagingDir: join(attempt.attemptDir, STAGING_DIR),
    cacheDir: join(attempt.attemptDir, RESUME_CACHE_DIR),
    clock,
    producer: context.producer,
    lease,
    emit,
  });
}
