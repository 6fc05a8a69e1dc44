import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { ManagerError, messageOf } from "../errors.js";

/** The lock directory inside a run attempt; only rank 0's manager writes there while it holds it. */
export const WRITER_LOCK_DIR = ".ckpt-writer.lock";
/** Inside the lock directory: who holds it. */
const HOLDER_FILE = "holder.json";
/** A holder on another host that stopped refreshing the lock's mtime this long ago is stale. */
export const WRITER_LOCK_STALE_MS = 10_000;
/** How often a second writer looks again while it waits for the holder to go away. */
const POLL_MS = 200;

export interface WriterLockHolder {
  readonly pid: number;
  readonly host: string;
  readonly started_at: string;
  readonly run_ts: string;
}

function holderOf(lockDir: string): WriterLockHolder | undefined {
  try {
    const value = JSON.parse(fs.readFileSync(join(lockDir, HOLDER_FILE), "utf8")) as WriterLockHolder;
    return typeof value.pid === "number" && typeof value.host === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * proper-lockfile's file-system calls, except that the lock directory appears already holding its
 * holder record (made under a temporary name, then renamed into place), so a second writer always
 * learns whom it waits for, and is removed with its content.
 */
function fsWithHolder(holder: WriterLockHolder): typeof fs {
  return {
    ...fs,
    mkdir(path: fs.PathLike, ...rest: unknown[]) {
      const done = rest.at(-1) as (error: NodeJS.ErrnoException | null) => void;
      const staged = `${String(path)}.${process.pid}-${randomBytes(4).toString("hex")}`;
      try {
        fs.mkdirSync(staged);
        fs.writeFileSync(join(staged, HOLDER_FILE), `${JSON.stringify(holder)}\n`, { flush: true });
        fs.renameSync(staged, String(path));
        done(null);
      } catch (error) {
        fs.rmSync(staged, { recursive: true, force: true });
        const code = (error as NodeJS.ErrnoException).code;
        done(
          code === "ENOTEMPTY" || code === "EEXIST"
            ? Object.assign(new Error("held"), { code: "EEXIST" })
            : (error as NodeJS.ErrnoException),
        );
      }
    },
    rmdir(path: fs.PathLike, done: (error: NodeJS.ErrnoException | null) => void) {
      fs.rm(String(path), { recursive: true }, done);
    },
    rmdirSync(path: fs.PathLike) {
      fs.rmSync(String(path), { recursive: true });
    },
  } as unknown as typeof fs;
}

/**
 * A lock left by a writer of this host whose process is gone (SIGKILL, OOM) is cleared at once
 * rather than after it goes stale: moved aside, and removed only if it still names that process
 * (a lock a live writer took meanwhile is put back). Also removes half-made locks of dead creators.
 */
function clearDeadLock(attemptDir: string): void {
  const lockDir = join(attemptDir, WRITER_LOCK_DIR);
  let names: string[] = [];
  try {
    names = fs.readdirSync(attemptDir);
  } catch {
    return;
  }
  for (const name of names) {
    const staged = /^\.ckpt-writer\.lock\.(\d+)-[0-9a-f]{8}$/.exec(name);
    if (staged !== null && processGone(Number(staged[1])))
      fs.rmSync(join(attemptDir, name), { recursive: true, force: true });
  }
  const holder = holderOf(lockDir);
  if (holder === undefined || holder.host !== hostname() || !processGone(holder.pid)) return;
  const aside = `${lockDir}.${holder.pid}-${randomBytes(4).toString("hex")}`;
  try {
    fs.renameSync(lockDir, aside);
  } catch {
    return;
  }
  const moved = holderOf(aside);
  if (moved?.pid === holder.pid && moved.started_at === holder.started_at) {
    fs.rmSync(aside, { recursive: true, force: true });
  } else {
    fs.renameSync(aside, lockDir);
  }
}

function describeHolder(holder: WriterLockHolder | undefined): string {
  return holder === undefined
    ? "a writer that has not named itself yet"
    : `pid ${holder.pid} on ${holder.host} (attempt ${holder.run_ts || "legacy"}, since ${holder.started_at})`;
}

/**
 * The exclusive local writer lock of a run attempt: rank 0's manager holds
 * `<attempt>/.ckpt-writer.lock` (proper-lockfile: a directory whose mtime the holder refreshes)
 * for its whole life, so two managers (two sidecars) never interleave commits, pointers or
 * retention in one attempt. A holder killed on this host is recognised at once; one on another
 * host once its lock is stale.
 */
export class WriterLock {
  private lost: Error | undefined;

  private constructor(
    readonly path: string,
    readonly holder: WriterLockHolder,
    private readonly unlock: () => Promise<void>,
  ) {}

  /** Takes the lock, waiting up to `waitMs` for a live holder to finish; then refuses by name. */
  static async acquire(attemptDir: string, runTs: string, waitMs: number): Promise<WriterLock> {
    const path = join(attemptDir, WRITER_LOCK_DIR);
    const holder: WriterLockHolder = {
      pid: process.pid,
      host: hostname(),
      started_at: new Date().toISOString(),
      run_ts: runTs,
    };
    const deadline = Date.now() + waitMs;
    for (;;) {
      clearDeadLock(attemptDir);
      let lock: WriterLock | undefined;
      try {
        const unlock = await lockfile.lock(attemptDir, {
          lockfilePath: path,
          realpath: false,
          stale: WRITER_LOCK_STALE_MS,
          retries: 0,
          fs: fsWithHolder(holder),
          onCompromised: (error: Error) => {
            if (lock !== undefined) lock.lost = error;
          },
        });
        lock = new WriterLock(path, holder, unlock);
        return lock;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ELOCKED") {
          throw new ManagerError(
            "MANAGER_LAYOUT_FAILED",
            `take the writer lock ${path}: ${messageOf(error)}`,
            {
              kind: "failed",
              subject: path,
              cause: error,
            },
          );
        }
      }
      if (Date.now() >= deadline) {
        throw new ManagerError(
          "MANAGER_WRITER_LOCKED",
          `open checkpoint manager: ${path} is held by ${describeHolder(holderOf(path))}: another manager (another ckpt-trainer sidecar) ` +
            `is writing this run attempt, and two writers would interleave commits and pointers. Stop the other job, or give this one ` +
            "another name or resume=off. A killed holder's lock is cleared at the next open on its host, or after " +
            `${WRITER_LOCK_STALE_MS / 1000} s elsewhere.`,
          { kind: "refused", subject: path },
        );
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  /** Throws when the lock was taken from this writer (it went stale under a stalled process, or was removed). */
  assertHeld(what: string): void {
    if (this.lost !== undefined) {
      throw new ManagerError(
        "MANAGER_WRITER_LOCK_LOST",
        `${what}: this manager lost the writer lock ${this.path} (${this.lost.message}); another writer may own the attempt now. Nothing more is committed; stop and rerun with resume=auto.`,
        { kind: "failed", subject: this.path, cause: this.lost },
      );
    }
  }

  async release(): Promise<void> {
    if (this.lost === undefined) await this.unlock().catch(() => {});
  }
}
