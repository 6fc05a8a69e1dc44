// The log of process windows of a run attempt (issue 19 §1), with real processes: a window whose
// process is SIGKILLed stays open, and the next start adds its own window after it.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { hostname } from "node:os";
import { join } from "node:path";
import { readAttemptWindows } from "@ckpt/trainer-checkpoint-manager";
import { testdir } from "@ckpt/test-utils";
import { expect, it } from "vitest";

const FIXTURE = join(import.meta.dirname, "fixtures", "window.mjs");
const RUN_TS = "20261203090000";

/** Starts a window; resolves once its manager is open, with the child and the attempt directory. */
async function startWindow(root: string, mode: "finalize" | "wait") {
  const child = spawn(process.execPath, [FIXTURE, root, RUN_TS, mode], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [line] = (await Promise.race([
    once(child.stdout, "data"),
    once(child, "exit").then(([code]) => {
      throw new Error(`the window exited (${String(code)}) before opening: ${stderr}`);
    }),
  ])) as [Buffer];
  const { attemptDir } = JSON.parse(line.toString()) as { attemptDir: string };
  return { child, attemptDir };
}

async function exited(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return { code: child.exitCode, signal: child.signalCode };
  const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
  return { code, signal };
}

it("a SIGKILLed window stays open; the next start adds a second window and ends it at finalize", async () => {
  const root = await testdir("ckpt-windows-");
  const killed = await startWindow(root, "wait");
  killed.child.kill("SIGKILL");
  expect(await exited(killed.child)).toEqual({ code: null, signal: "SIGKILL" });

  const afterKill = await readAttemptWindows(killed.attemptDir);
  expect(afterKill?.windows).toEqual([
    { host: hostname(), pid: killed.child.pid, started_at: expect.any(String), ended_at: null },
  ]);

  const clean = await startWindow(root, "finalize");
  expect(await exited(clean.child)).toEqual({ code: 0, signal: null });
  expect(clean.attemptDir).toBe(killed.attemptDir);

  const windows = (await readAttemptWindows(clean.attemptDir))?.windows ?? [];
  expect(windows.map((w) => [w.pid, w.ended_at === null])).toEqual([
    [killed.child.pid, true],
    [clean.child.pid, false],
  ]);
  expect(windows[0]).toEqual(afterKill?.windows[0]);
  const second = windows[1]!;
  expect(Date.parse(second.ended_at!)).toBeGreaterThanOrEqual(Date.parse(second.started_at));
  expect(Date.parse(second.started_at)).toBeGreaterThanOrEqual(Date.parse(windows[0]!.started_at));
}, 60_000);
