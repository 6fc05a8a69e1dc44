// The log of process windows of a run attempt: pure appends and ends, what open and finalize
// write, and a damaged log (a warning for training, a coded refusal for readers).
import { readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  CheckpointManager,
  type ManagerEvent,
  parseManagerConfig,
  readAttemptWindows,
  WINDOWS_FILE,
  WINDOWS_SCHEMA,
} from "../src/index.js";
import { type AttemptWindow, withNewestEnded, withWindow } from "../src/windows.js";
import { steppingClock, tempRoot } from "./helpers.js";

const RUN_TS = "20260901120000";

const window = (pid: number): AttemptWindow => ({
  host: "node-1",
  pid,
  started_at: "2026-09-01T12:00:00.000Z",
  ended_at: null,
});

async function open(root: string, events: ManagerEvent[] = [], rank = 0): Promise<CheckpointManager> {
  return CheckpointManager.open({
    config: parseManagerConfig({ save_async: false, save_every: 1, run_ts: RUN_TS }).config,
    outputRoot: root,
    project: "proj",
    group: "grp",
    name: "run",
    rank,
    clock: steppingClock(),
    termination: { signals: false, sentinelPath: null },
    onEvent: (event) => events.push(event),
  });
}

describe("windows log (pure)", () => {
  it("appends a window, oldest first, keeping the newest 1000", () => {
    expect(withWindow(undefined, window(1))).toEqual({ schema: WINDOWS_SCHEMA, windows: [window(1)] });
    let log = withWindow(undefined, window(0));
    for (let pid = 1; pid <= 1000; pid++) log = withWindow(log, window(pid));
    expect(log.windows).toHaveLength(1000);
    expect(log.windows[0]!.pid).toBe(1);
    expect(log.windows.at(-1)!.pid).toBe(1000);
  });

  it("ends only the newest window", () => {
    const log = withNewestEnded(
      withWindow(withWindow(undefined, window(1)), window(2)),
      new Date(Date.UTC(2026, 8, 2)),
    );
    expect(log.windows.map((w) => w.ended_at)).toEqual([null, "2026-09-02T00:00:00.000Z"]);
  });
});

describe("windows log of a run attempt", () => {
  it("rank 0 opens its window at open and ends it at finalize; a second manager appends", async () => {
    const root = await tempRoot("ckpt-mgr-windows-");
    const first = await open(root);
    const opened = await readAttemptWindows(first.attemptDir);
    expect(opened?.windows).toEqual([
      { host: hostname(), pid: process.pid, started_at: expect.any(String), ended_at: null },
    ]);
    await first.finalize();
    const second = await open(root);
    await second.finalize();
    const windows = (await readAttemptWindows(second.attemptDir))?.windows ?? [];
    expect(windows.map((w) => w.ended_at === null)).toEqual([false, false]);
    expect(Date.parse(windows[0]!.ended_at!)).toBeGreaterThan(Date.parse(windows[0]!.started_at));
  });

  it("another rank records nothing", async () => {
    const root = await tempRoot("ckpt-mgr-windows-");
    const rank1 = await open(root, [], 1);
    await rank1.finalize();
    expect(await readAttemptWindows(rank1.attemptDir)).toBeUndefined();
  });

  it("a damaged log is refused by readers, and training warns and starts a new log", async () => {
    const root = await tempRoot("ckpt-mgr-windows-");
    const first = await open(root);
    await first.finalize();
    const path = join(first.attemptDir, WINDOWS_FILE);
    await writeFile(path, '{"schema": "ckpt.attempt-windows.v1", "windows": [');
    await expect(readAttemptWindows(first.attemptDir)).rejects.toMatchObject({
      code: "MANAGER_WINDOWS_INVALID",
      subject: path,
    });
    const events: ManagerEvent[] = [];
    const second = await open(root, events);
    expect(events).toContainEqual({ type: "warning", message: expect.stringContaining(path) });
    await second.finalize();
    expect(JSON.parse(await readFile(path, "utf8")).windows).toHaveLength(1);
  });
});
