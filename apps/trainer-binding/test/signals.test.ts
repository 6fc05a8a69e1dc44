// The built ckpt-trainer sidecar (dist/bin.js) as a real process receiving real signals: what a
// SIGTERM says and leaves, with and without a trainer session open, and with a save in progress.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { writeTorchFile } from "@ckpt/tensors";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";

const BIN = resolve(import.meta.dirname, "..", "dist", "bin.js");

type Save = { id: string; step: number; dir: string; components: Array<{ name: string; path: string }> };

/** A spawned `ckpt-trainer serve` driven line by line, as the Python client drives it. */
function sidecar(): {
  child: ChildProcessWithoutNullStreams;
  call(op: string, args?: Record<string, unknown>): Promise<Record<string, unknown>>;
  stderrUntil(text: string): Promise<string>;
  exited: Promise<number | null>;
} {
  const child = spawn(process.execPath, [BIN, "serve"], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const waiting: Array<() => void> = [];
  const wake = () => {
    for (const w of waiting.splice(0)) w();
  };
  child.stdout.on("data", (d) => {
    out += d;
    wake();
  });
  child.stderr.on("data", (d) => {
    err += d;
    wake();
  });
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  let id = 0;
  const until = async (ready: () => boolean) => {
    while (!ready()) await new Promise<void>((r) => waiting.push(r));
  };
  return {
    child,
    exited,
    async call(op, args = {}) {
      const mine = ++id;
      child.stdin.write(`${JSON.stringify({ id: mine, op, args })}\n`);
      const line = () => out.split("\n").find((l) => l.startsWith(`{"id":${mine},`));
      await until(() => line() !== undefined);
      const response = JSON.parse(line()!);
      if (!response.ok) throw new Error(`${op}: ${JSON.stringify(response.error)}`);
      return response.result;
    },
    async stderrUntil(text) {
      await until(() => err.includes(text));
      return err;
    },
  };
}

/** A session holding an attempt under `root`, with the save of step 2 begun and its files written. */
async function saveInProgress(s: ReturnType<typeof sidecar>, root: string): Promise<Save> {
  await s.call("hello", { protocol: [1] });
  await s.call("open", {
    config: { save_every: 2, save_async: false },
    output_root: root,
    project: "p",
    group: "g",
    name: "n",
  });
  const save = (await s.call("begin_save", { step: 2 })).save as Save;
  for (const c of save.components) {
    if (!["model", "optim", "trainer"].includes(c.name)) continue;
    await writeTorchFile(c.path, {
      tree: { step: 2, [c.name]: { dtype: "U8", shape: [4] } },
      provideTensor: () => new Uint8Array(4),
      sync: false,
    });
  }
  return save;
}

const committed = (save: Save) => existsSync(join(save.dir, ".posttrain-checkpoint.json"));
const pointer = (save: Save) => join(save.dir, "..", "latest_checkpoint.txt");

describe("ckpt-trainer serve under signals (real process)", () => {
  it("with no session open, SIGTERM ends it with one line and exit 143", async () => {
    const s = sidecar();
    await s.call("hello", { protocol: [1] });
    s.child.kill("SIGTERM");
    expect(await s.exited).toBe(143);
    expect(await s.stderrUntil("\n")).toBe(
      "[ckpt-trainer] interrupted (SIGTERM): no trainer session was open, so nothing was left half done; the sidecar ended\n",
    );
  });

  it("a SIGTERM during a save keeps serving: the trainer is told to stop, and its commit lands whole", async () => {
    const s = sidecar();
    const save = await saveInProgress(s, await testdir("ckpt-trainer-signal-"));
    s.child.kill("SIGTERM");
    expect(await s.stderrUntil("SIGTERM received")).toContain(
      "SIGTERM received: the trainer is asked to stop at its next should_stop; the sidecar keeps serving it until it finalizes or goes away, so a save in progress is committed whole or not at all",
    );
    expect(await s.call("should_stop", { signals: [] })).toMatchObject({
      stop: true,
      cause: { where: "sidecar" },
    });
    expect(await s.call("commit", { save_id: save.id })).toMatchObject({ status: "committed", iteration: 2 });
    await s.call("finalize");
    expect(await s.exited).toBe(0);
    expect(committed(save)).toBe(true);
    expect(existsSync(pointer(save))).toBe(true);
  });

  it("a SIGTERM during a save whose trainer then dies leaves it uncommitted, not half-committed", async () => {
    const s = sidecar();
    const save = await saveInProgress(s, await testdir("ckpt-trainer-signal-"));
    s.child.kill("SIGTERM");
    await s.stderrUntil("SIGTERM received");
    s.child.stdin.end(); // the trainer is gone before it asked for the commit
    expect(await s.exited).toBe(1);
    expect(await s.stderrUntil("went away with 1 save(s) open")).toContain("they are not committed");
    expect(committed(save)).toBe(false);
    expect(existsSync(pointer(save))).toBe(false);
  });
});
