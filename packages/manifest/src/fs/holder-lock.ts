import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";
import lockfile from "proper-lockfile";

/** Inside a lock directory: who holds it. */
export const LOCK_HOLDER_FILE = "holder.json";

/** The record inside a lock directory naming its holder; callers add their own fields. */
export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  /** ISO time at which the holder took the lock. */
  readonly started_at: string;
  readonly [field: string]: string | number;
}

/** A lock this process holds. */
export interface HeldLock {
  readonly path: string;
  readonly holder: LockHolder;
  /** Why the lock was taken from this process (it went stale or was removed), if it was. */
  lost(): Error | undefined;
  release(): Promise<void>;
}

export interface LockDirectoryOptions {
  /** The lock directory, e.g. `<out>.lock`. */
  readonly lockDir: string;
  /** Fields the holder record carries beside pid, host and start time (e.g. the tool). */
  readonly holderFields?: Readonly<Record<string, string>>;
  /** A holder that stopped refreshing the directory's mtime this long ago is stale. */
  readonly staleMs: number;
  /** How long a live holder is waited for before the answer is `busy`. */
  readonly waitMs: number;
  readonly pollMs?: number;
  readonly signal?: AbortSignal;
  /** Called once, when the lock is first found held. */
  readonly onWait?: (holder: LockHolder | undefined) => void;
  readonly now?: () => Date;
}

export type LockOutcome =
  | { readonly status: "held"; readonly lock: HeldLock }
  | { readonly status: "busy"; readonly holder: LockHolder | undefined }
  | { readonly status: "aborted" }
  | { readonly status: "failed"; readonly error: unknown };

/** The holder record of a lock directory, or undefined when it names nobody (half made, or not a lock). */
export function readLockHolder(lockDir: string): LockHolder | undefined {
  try {
    const value = JSON.parse(fs.readFileSync(join(lockDir, LOCK_HOLDER_FILE), "utf8")) as LockHolder;
    return typeof value.pid === "number" && typeof value.host === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

export function describeLockHolder(holder: LockHolder | undefined): string {
  return holder === undefined
    ? "an unknown holder (the lock names nobody yet)"
    : `pid ${holder.pid} on host ${holder.host}, holding it since ${holder.started_at}`;
}

/** Whether `pid` runs on this host (EPERM: it does, under another user). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The ownership rule (issue 16) for lock directories: one is a lock's only while it holds nothing
 * but its holder record (or nothing, half made). A directory under a lock's name that holds other
 * files is someone else's and is never removed, however stale or dead its holder looks.
 */
export function holdsOnlyLockRecord(dir: string): boolean {
  try {
    return fs.readdirSync(dir).every((name) => name === LOCK_HOLDER_FILE);
  } catch {
    return false;
  }
}

/** What removing a directory that is not a lock's answers: it is left as it is. */
function notALock(dir: string): NodeJS.ErrnoException {
  return Object.assign(
    new Error(`${dir} holds files a lock does not write; it is not a ckpt lock and was left untouched`),
    { code: "ENOTEMPTY", path: dir },
  );
}

/**
 * Where a lock's holder stands, seen from this host: `dead` (it ran here and its process is gone:
 * the only state in which anyone but the holder may remove the lock), `live`, `other-host` (its
 * liveness cannot be known from here) or `unnamed` (no holder record yet). Pure given `alive`.
 */
export type LockHolderState = "dead" | "live" | "other-host" | "unnamed";

export function judgeLockHolder(
  holder: LockHolder | undefined,
  here: { readonly host: string; readonly alive: (pid: number) => boolean },
): LockHolderState {
  if (holder === undefined) return "unnamed";
  if (holder.host !== here.host) return "other-host";
  return here.alive(holder.pid) ? "live" : "dead";
}

const THIS_HOST = { host: hostname(), alive: isProcessAlive };

/** `<lock>.<pid>-<hex>` (being created) and `<lock>.dead-<pid>-<hex>` (being removed). */
const temporaryName = (lockDir: string, dead: boolean) =>
  `${lockDir}.${dead ? "dead-" : ""}${process.pid}-${randomBytes(4).toString("hex")}`;

/**
 * proper-lockfile's file-system calls, except that the lock directory appears already holding its
 * holder record (built under a temporary name and renamed into place, so no waiter ever sees a
 * lock that names nobody) and is removed with its content.
 */
function fsWithHolder(holder: LockHolder): typeof fs {
  return {
    ...fs,
    mkdir(path: fs.PathLike, ...rest: unknown[]) {
      const done = rest.at(-1) as (error: NodeJS.ErrnoException | null) => void;
      const staged = temporaryName(String(path), false);
      try {
        fs.mkdirSync(staged);
        fs.writeFileSync(join(staged, LOCK_HOLDER_FILE), `${JSON.stringify(holder)}\n`, { flush: true });
        fs.renameSync(staged, String(path));
        done(null);
      } catch (error) {
        fs.rmSync(staged, { recursive: true, force: true });
        const code = (error as NodeJS.ErrnoException).code;
        // Renaming onto an existing, non-empty lock directory fails: someone holds it.
        done(
          code === "ENOTEMPTY" || code === "EEXIST"
            ? Object.assign(new Error("lock exists"), { code: "EEXIST" })
            : (error as NodeJS.ErrnoException),
        );
      }
    },
    rmdir(path: fs.PathLike, done: (error: NodeJS.ErrnoException | null) => void) {
      if (!holdsOnlyLockRecord(String(path))) done(notALock(String(path)));
      else fs.rm(String(path), { recursive: true }, done);
    },
    rmdirSync(path: fs.PathLike) {
      if (!holdsOnlyLockRecord(String(path))) throw notALock(String(path));
      fs.rmSync(String(path), { recursive: true });
    },
  } as unknown as typeof fs;
}

/**
 * Removes lock directories a killed process of this host left half made or half removed beside
 * the lock, and the lock itself when its holder ran on this host and is gone (without waiting
 * for its mtime to go stale).
 */
function clearDeadLocks(lockDir: string): void {
  const escaped = basename(lockDir).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const temporary = new RegExp(`^${escaped}\\.(?:dead-)?(\\d+)-[0-9a-f]{8}$`);
  let names: string[] = [];
  try {
    names = fs.readdirSync(dirname(lockDir));
  } catch {
    return;
  }
  for (const name of names) {
    const match = temporary.exec(name);
    if (!match) continue;
    const path = join(dirname(lockDir), name);
    const holder = readLockHolder(path);
    if (
      (holder === undefined || holder.host === hostname()) &&
      !isProcessAlive(Number(match[1])) &&
      holdsOnlyLockRecord(path)
    )
      fs.rmSync(path, { recursive: true, force: true });
  }
  removeLockOfDeadHolder(lockDir);
}

/**
 * Removes `lockDir` when it is a lock (nothing but its holder record) whose holder ran on this
 * host and is gone; returns whether it did. The lock is moved aside first and checked again, so
 * one a live process took meanwhile is put back rather than removed.
 */
export function removeLockOfDeadHolder(lockDir: string): boolean {
  const holder = readLockHolder(lockDir);
  if (judgeLockHolder(holder, THIS_HOST) !== "dead" || holder === undefined) return false;
  if (!holdsOnlyLockRecord(lockDir)) return false;
  const aside = temporaryName(lockDir, true);
  try {
    fs.renameSync(lockDir, aside);
  } catch {
    return false;
  }
  const moved = readLockHolder(aside);
  if (moved?.pid === holder.pid && moved.started_at === holder.started_at) {
    fs.rmSync(aside, { recursive: true, force: true });
    return true;
  }
  try {
    fs.renameSync(aside, lockDir);
  } catch {
    // Another lock appeared meanwhile; the one moved aside is live and its holder removes it.
  }
  return false;
}

/**
 * Takes an exclusive lock directory (proper-lockfile: a directory whose mtime the holder keeps
 * fresh) that names its holder (pid, host, start time, `holderFields`). A held lock is polled for
 * up to `waitMs`. A holder that died on this host is recognised at once; one elsewhere once its
 * lock is `staleMs` stale. Decides nothing about what the caller reports: it gets the outcome.
 */
export async function lockDirectory(options: LockDirectoryOptions): Promise<LockOutcome> {
  const { lockDir } = options;
  const holder: LockHolder = {
    ...options.holderFields,
    pid: process.pid,
    host: hostname(),
    started_at: (options.now ?? (() => new Date()))().toISOString(),
  };
  const deadline = Date.now() + options.waitMs;
  let announced = false;
  for (;;) {
    if (options.signal?.aborted) return { status: "aborted" };
    clearDeadLocks(lockDir);
    let lost: Error | undefined;
    try {
      const unlock = await lockfile.lock(dirname(lockDir), {
        lockfilePath: lockDir,
        realpath: false,
        stale: options.staleMs,
        retries: 0,
        fs: fsWithHolder(holder),
        onCompromised: (error: Error) => {
          lost = error;
        },
      });
      const lock: HeldLock = {
        path: lockDir,
        holder,
        lost: () => lost,
        async release() {
          if (lost === undefined) await unlock().catch(() => {});
        },
      };
      return { status: "held", lock };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ELOCKED") return { status: "failed", error };
    }
    const current = readLockHolder(lockDir);
    if (Date.now() >= deadline) return { status: "busy", holder: current };
    if (!announced) {
      announced = true;
      options.onWait?.(current);
    }
    const pollMs = options.pollMs ?? 250;
    await new Promise((r) => setTimeout(r, Math.min(pollMs, Math.max(1, deadline - Date.now()))));
  }
}
