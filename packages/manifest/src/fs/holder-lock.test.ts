import { spawnSync } from "node:child_process";
import { mkdir, readdir, readFile, utimes, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { describeLockHolder, LOCK_HOLDER_FILE, lockDirectory } from "./holder-lock.js";

async function lockIn(): Promise<string> {
  const tmp = await testdir("ckpt-holder-lock-");
  return join(tmp, "out.lock");
}

/** Leaves a lock as a holder with `pid` on `host` would have, last refreshed `ageMs` ago. */
async function leaveLock(lockDir: string, pid: number, host: string, ageMs = 0): Promise<void> {
  await mkdir(lockDir);
  await writeFile(
    join(lockDir, LOCK_HOLDER_FILE),
    JSON.stringify({ pid, host, started_at: "2026-01-01T00:00:00.000Z" }),
  );
  const when = new Date(Date.now() - ageMs);
  await utimes(lockDir, when, when);
}

/** The pid of a process that has exited. */
function deadPid(): string {
  return spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString();
}

const options = (lockDir: string) => ({ lockDir, staleMs: 10_000, waitMs: 0, pollMs: 20 });

describe("lockDirectory", () => {
  it("holds exclusively, names its holder inside, and is free again once released", async () => {
    const lockDir = await lockIn();
    const first = await lockDirectory({ ...options(lockDir), holderFields: { tool: "test" } });
    if (first.status !== "held") throw new Error(`expected held, got ${first.status}`);
    const record = JSON.parse(await readFile(join(lockDir, LOCK_HOLDER_FILE), "utf8"));
    expect(record).toMatchObject({ pid: process.pid, host: hostname(), tool: "test" });
    const second = await lockDirectory(options(lockDir));
    expect(second).toMatchObject({ status: "busy", holder: { pid: process.pid, tool: "test" } });
    expect(describeLockHolder(second.status === "busy" ? second.holder : undefined)).toContain(
      `pid ${process.pid} on host ${hostname()}`,
    );
    await first.lock.release();
    const third = await lockDirectory(options(lockDir));
    expect(third.status).toBe("held");
    if (third.status === "held") await third.lock.release();
  });

  it("waits for a holder that releases within the wait", async () => {
    const lockDir = await lockIn();
    const first = await lockDirectory(options(lockDir));
    if (first.status !== "held") throw new Error("expected held");
    const waited: unknown[] = [];
    setTimeout(() => void first.lock.release(), 150);
    const second = await lockDirectory({ ...options(lockDir), waitMs: 5_000, onWait: (h) => waited.push(h) });
    expect(second.status).toBe("held");
    expect(waited).toHaveLength(1);
    if (second.status === "held") await second.lock.release();
  });

  it("clears at once a lock whose holder on this host is gone, and its half-made temporaries", async () => {
    const lockDir = await lockIn();
    const dead = deadPid();
    await leaveLock(lockDir, Number(dead), hostname());
    await mkdir(`${lockDir}.${dead}-0123abcd`);
    const outcome = await lockDirectory(options(lockDir));
    expect(outcome.status).toBe("held");
    expect((await readdir(join(lockDir, ".."))).sort()).toEqual(["out.lock"]);
    if (outcome.status === "held") await outcome.lock.release();
  });

  it("waits out a holder on another host until its lock is stale", async () => {
    const fresh = await lockIn();
    await leaveLock(fresh, 4242, "elsewhere.example");
    expect(await lockDirectory(options(fresh))).toMatchObject({ status: "busy", holder: { pid: 4242 } });
    const stale = await lockIn();
    await leaveLock(stale, 4242, "elsewhere.example", 60_000);
    const outcome = await lockDirectory(options(stale));
    expect(outcome.status).toBe("held");
    if (outcome.status === "held") await outcome.lock.release();
  });

  it("never removes a look-alike of a lock or its temporary that holds files a lock does not write", async () => {
    const lockDir = await lockIn();
    const dead = deadPid();
    await leaveLock(lockDir, Number(dead), hostname());
    await writeFile(join(lockDir, "notes.txt"), "mine");
    const temporary = `${lockDir}.${dead}-0123abcd`;
    await mkdir(temporary);
    await writeFile(join(temporary, "notes.txt"), "mine too");
    expect((await lockDirectory(options(lockDir))).status).not.toBe("held");
    expect(await readFile(join(lockDir, "notes.txt"), "utf8")).toBe("mine");
    expect(await readFile(join(temporary, "notes.txt"), "utf8")).toBe("mine too");

    const stale = await lockIn();
    await mkdir(stale);
    await writeFile(join(stale, "notes.txt"), "mine");
    const old = new Date(Date.now() - 60_000);
    await utimes(stale, old, old);
    expect((await lockDirectory(options(stale))).status).not.toBe("held");
    expect(await readFile(join(stale, "notes.txt"), "utf8")).toBe("mine");
  });

  it("stops waiting when aborted", async () => {
    const lockDir = await lockIn();
    await leaveLock(lockDir, 4242, "elsewhere.example");
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const outcome = await lockDirectory({ ...options(lockDir), waitMs: 30_000, signal: controller.signal });
    expect(outcome.status).toBe("aborted");
  });
});
