import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";
import lockfile from "proper-lockfile";
import { describe, HfConversionError, refusal } from "../errors.js";

/** The record inside `<out>.lock` naming who holds it. */
export const LOCK_HOLDER_FILE = "holder.json";
/** A holder that stopped refreshing its lock this long ago is stale (proper-lockfile's mtime rule). */
export const LOCK_STALE_MS = 10_000;
/** How often a waiter looks at the lock again. */
const POLL_MS = 250;

export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  /** ISO time at which the holder took the lock. */
  readonly started_at: string;
  readonly tool: string;
}

export function lockPathFor(out: string): string {
  return `${out}.lock`;
}

function readHolder(lockDir: string): LockHolder | undefined {
  try {
    const value = JSON.parse(fs.readFileSync(join(lockDir, LOCK_HOLDER_FILE), "utf8")) as LockHolder;
    return typeof value.pid === "number" && typeof value.host === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

export function describeHolder(holder: LockHolder | undefined): string {
  return holder === undefined
    ? "an unknown holder (the lock names nobody yet)"
    : `pid ${holder.pid} on host ${holder.host}, holding it since ${holder.started_at}`;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The file-system operations proper-lockfile uses, with the lock directory created together with
 * its holder record (built under a temporary name and renamed into place, so no waiter ever sees
 * a lock that names nobody) and removed with it.
 */
function lockFs(holder: LockHolder): typeof fs {
  const removeSync = (path: string) => fs.rmSync(path, { recursive: true });
  return {
    ...fs,
    mkdir(path: fs.PathLike, ...rest: unknown[]) {
      const callback = rest[rest.length - 1] as (error: NodeJS.ErrnoException | null) => void;
      const target = String(path);
      const temp = `${target}.${process.pid}-${randomBytes(4).toString("hex")}`;
      try {
        fs.mkdirSync(temp);
        const fd = fs.openSync(join(temp, LOCK_HOLDER_FILE), "wx");
        fs.writeSync(fd, `${JSON.stringify(holder)}\n`);
        fs.fsyncSync(fd);
        fs.closeSync(fd);
        fs.renameSync(temp, target);
        callback(null);
      } catch (error) {
        fs.rmSync(temp, { recursive: true, force: true });
        const code = (error as NodeJS.ErrnoException).code;
        // Renaming onto an existing, non-empty lock directory fails: someone holds it.
        if (code === "ENOTEMPTY" || code === "EEXIST")
          callback(Object.assign(new Error("lock exists"), { code: "EEXIST" }));
        else callback(error as NodeJS.ErrnoException);
      }
    },
    rmdir(path: fs.PathLike, callback: (error: NodeJS.ErrnoException | null) => void) {
      fs.rm(String(path), { recursive: true }, callback);
    },
    rmdirSync: removeSync,
  } as unknown as typeof fs;
}

/** `<out>.lock.<pid>-<hex>` (a lock being created) and `<out>.lock.dead-<pid>-<hex>` (one being removed). */
function lockTemporaryPattern(lockDir: string): RegExp {
  const name = basename(lockDir).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`^${name}\\.(?:dead-)?(\\d+)-[0-9a-f]{8}$`);
}

/**
 * Removes lock directories a killed process left half made or half removed beside `<out>.lock`:
 * only those named after a process of this host that is gone.
 */
function clearAbandonedTemporaries(lockDir: string): void {
  const pattern = lockTemporaryPattern(lockDir);
  let names: string[];
  try {
    names = fs.readdirSync(dirname(lockDir));
  } catch {
    return;
  }
  for (const name of names) {
    const match = pattern.exec(name);
    if (!match) continue;
    const path = join(dirname(lockDir), name);
    const holder = readHolder(path);
    // Named by its creator's pid; the holder record (when written) says which host it is from.
    if ((holder === undefined || holder.host === hostname()) && !isAlive(Number(match[1]))) {
      fs.rmSync(path, { recursive: true, force: true });
    }
  }
}

/**
 * Removes a lock whose holder ran on this host and is gone (killed), without waiting for its
 * mtime to go stale. It is moved aside first and checked again, so a lock taken meanwhile by a
 * live process is put back rather than removed.
 */
function clearDeadHolder(lockDir: string): boolean {
  const holder = readHolder(lockDir);
  if (holder === undefined || holder.host !== hostname() || isAlive(holder.pid)) return false;
  const aside = `${lockDir}.dead-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    fs.renameSync(lockDir, aside);
  } catch {
    return false;
  }
  const moved = readHolder(aside);
  if (moved?.pid === holder.pid && moved.started_at === holder.started_at) {
    fs.rmSync(aside, { recursive: true, force: true });
    return true;
  }
  try {
    fs.renameSync(aside, lockDir);
  } catch {
    // Another lock appeared meanwhile; the one we moved is live and keeps refreshing its mtime,
    // so its holder notices nothing until it releases. Leave it aside for its holder to remove.
  }
  return false;
}

export interface OutputLock {
  readonly holder: LockHolder;
  /** Throws MATERIALIZE_LOCK_LOST when the lock was taken from us (it went stale or was removed). */
  assertHeld(): void;
  release(): Promise<void>;
}

/**
 * Takes `<out>.lock` (proper-lockfile: a directory whose mtime the holder keeps fresh), naming the
 * holder (pid, host, start time) inside it. A held lock is polled for up to `waitSeconds`, then
 * refused by name. A holder that died on this host is recognised at once; one elsewhere once its
 * lock is {@link LOCK_STALE_MS} stale.
 */
export async function acquireOutputLock(
  out: string,
  options: { waitSeconds: number; signal?: AbortSignal; onWait?: (holder: string) => void; now?: () => Date },
): Promise<OutputLock> {
  const lockDir = lockPathFor(out);
  const holder: LockHolder = {
    pid: process.pid,
    host: hostname(),
    started_at: (options.now ?? (() => new Date()))().toISOString(),
    tool: "ckpt materialize-hf",
  };
  let lost: Error | undefined;
  const deadline = Date.now() + options.waitSeconds * 1000;
  let announced = false;
  for (;;) {
    if (options.signal?.aborted) {
      throw new HfConversionError("MATERIALIZE_ABORTED", `lock ${lockDir}: aborted while waiting.`, {
        kind: "failed",
        stage: "lock",
      });
    }
    clearDeadHolder(lockDir);
    clearAbandonedTemporaries(lockDir);
    try {
      const release = await lockfile.lock(out, {
        lockfilePath: lockDir,
        realpath: false,
        stale: LOCK_STALE_MS,
        retries: 0,
        fs: lockFs(holder),
        onCompromised: (error: Error) => {
          lost = error;
        },
      });
      return {
        holder,
        assertHeld() {
          if (lost !== undefined) {
            throw new HfConversionError(
              "MATERIALIZE_LOCK_LOST",
              `lock ${lockDir}: this run lost its lock (${lost.message}); another materializer may be writing ${out}. Nothing was published; re-run.`,
              { kind: "failed", file: lockDir, stage: "lock", cause: lost },
            );
          }
        },
        async release() {
          if (lost === undefined) await release().catch(() => {});
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ELOCKED") {
        throw new HfConversionError("MATERIALIZE_BUILD_FAILED", `lock ${lockDir}: ${describe(error)}.`, {
          kind: "failed",
          file: lockDir,
          stage: "lock",
          cause: error,
        });
      }
    }
    const current = describeHolder(readHolder(lockDir));
    if (Date.now() >= deadline) {
      throw refusal(
        "MATERIALIZE_LOCKED",
        `${lockDir} is held by ${current}${options.waitSeconds > 0 ? ` after waiting ${options.waitSeconds} s` : ""}`,
        `the build would have written ${out} while another materializer does`,
        "Wait for it to finish (or raise --lock-wait-seconds); a killed holder's lock expires by itself.",
        { file: lockDir },
      );
    }
    if (!announced) {
      announced = true;
      options.onWait?.(current);
    }
    await new Promise((r) => setTimeout(r, Math.min(POLL_MS, Math.max(1, deadline - Date.now()))));
  }
}
