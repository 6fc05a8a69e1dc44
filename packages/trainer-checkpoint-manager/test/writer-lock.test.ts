// The local writer lock: one rank-0 manager per run attempt at a time; a killed holder never
// blocks the rerun; a holder elsewhere is waited out only once its lock is stale.
import { spawn } from "node:child_process";
import { mkdir, readdir, utimes, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { CheckpointManager, type ManagerError, parseManagerConfig } from "../src/index.js";
import { saveStep, tempRoot } from "./helpers.js";

const RUN_TS = "20260901120000";

async function open(root: string, extra: { rank?: number; writerLockWaitMs?: number } = {}) {
  const manager = await CheckpointManager.open({
    config: parseManagerConfig({ save_async: false, save_every: 1, run_ts: RUN_TS }).config,
    outputRoot: root,
    project: "proj",
    group: "grp",
    name: "run",
    termination: { signals: false, sentinelPath: null },
    writerLockWaitMs: 0,
    ...extra,
  });
  onTestFinished(() => manager.finalize().catch(() => {}));
  return manager;
}

/** Leaves `.ckpt-writer.lock` as a holder with `pid` on `host` would have. */
async function leaveLock(attemptDir: string, pid: number, host: string, ageMs = 0): Promise<string> {
  const lock = join(attemptDir, ".ckpt-writer.lock");
  await mkdir(lock, { recursive: true });
  await writeFile(
    join(lock, "holder.json"),
    JSON.stringify({ pid, host, started_at: new Date().toISOString(), run_ts: RUN_TS }),
  );
  const when = new Date(Date.now() - ageMs);
  await utimes(lock, when, when);
  return lock;
}

/** The pid of a real process that was SIGKILLed (and reaped). */
async function killedPid(): Promise<number> {
  const child = spawn("sleep", ["60"], { stdio: "ignore" });
  const gone = new Promise((resolve) => child.on("exit", resolve));
  child.kill("SIGKILL");
  await gone;
  return child.pid!;
}

describe("local writer lock (.ckpt-writer.lock in the run attempt)", () => {
  it("a second live writer of the same attempt is refused by name; after finalize it may open", async () => {
    const root = await tempRoot();
    const first = await open(root);
    await saveStep(first, 1, { cadence: true });
    const error = (await open(root).catch((e: unknown) => e)) as ManagerError;
    expect(error.code).toBe("MANAGER_WRITER_LOCKED");
    expect(error.subject).toBe(join(first.attemptDir, ".ckpt-writer.lock"));
    expect(error.message).toContain(`pid ${process.pid} on host ${hostname()}`);
    expect(error.message).toContain("Stop the other job");
    // Other ranks never write the attempt's commits and take no lock.
    const rank1 = await open(root, { rank: 1 });
    expect(rank1.rank).toBe(1);
    await first.finalize();
    expect(await readdir(first.attemptDir)).not.toContain(".ckpt-writer.lock");
    const second = await open(root);
    expect(await second.resolveResume()).toMatchObject({ kind: "checkpoint", iteration: 1 });
  });

  it("a writer that waits sees the holder finish and then opens", async () => {
    const root = await tempRoot();
    const first = await open(root);
    const waiting = open(root, { writerLockWaitMs: 60_000 });
    await new Promise((r) => setTimeout(r, 300));
    await first.finalize();
    expect((await waiting).attemptDir).toBe(first.attemptDir);
  });

  it("a holder SIGKILLed on this host does not block the rerun", async () => {
    const root = await tempRoot();
    const attemptDir = join(root, "proj", "grp", "run", RUN_TS);
    await leaveLock(attemptDir, await killedPid(), hostname());
    await mkdir(join(attemptDir, ".ckpt-writer.lock.999999-0123abcd"));
    const manager = await open(root);
    await saveStep(manager, 1, { cadence: true });
    expect((await readdir(attemptDir)).filter((n) => n.startsWith(".ckpt-writer.lock"))).toEqual([
      ".ckpt-writer.lock",
    ]);
  });

  it("a holder on another host is refused while its lock is fresh, taken over once it is stale", async () => {
    const root = await tempRoot();
    const attemptDir = join(root, "proj", "grp", "run", RUN_TS);
    await leaveLock(attemptDir, 4242, "another-host.example");
    await expect(open(root)).rejects.toMatchObject({
      code: "MANAGER_WRITER_LOCKED",
      message: expect.stringContaining("pid 4242 on host another-host.example"),
    });
    await leaveLock(attemptDir, 4242, "another-host.example", 60_000);
    const manager = await open(root);
    expect(manager.attemptDir).toBe(attemptDir);
  });
});
