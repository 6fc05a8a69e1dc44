// The sidecar session over a real CheckpointManager on real directories: call order, open saves,
// cadence, and what a trainer that goes away leaves behind.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeTorchFile } from "@ckpt/tensors";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import type { Request } from "../src/protocol/messages.js";
import { parseRequest } from "../src/protocol/messages.js";
import { SidecarSession } from "../src/session.js";

let tmp = "";
let logs: string[];
beforeEach(async () => {
  tmp = await testdir("ckpt-session-");
  logs = [];
});

let nextId = 1;
/** A request as it arrives on the wire (parsed and validated like a real line). */
function req(op: string, args: Record<string, unknown> = {}): Request {
  const parsed = parseRequest(JSON.stringify({ id: nextId++, op, args }));
  if ("error" in parsed) throw parsed.error;
  return parsed;
}

async function call(session: SidecarSession, op: string, args: Record<string, unknown> = {}) {
  return (await session.handle(req(op, args))).result as Record<string, unknown>;
}

async function openSession(config: Record<string, unknown> = {}): Promise<SidecarSession> {
  const session = new SidecarSession({ log: (l) => logs.push(l), serverVersion: "test" });
  await call(session, "hello", { protocol: [1] });
  await call(session, "open", {
    config: { save_every: 2, save_async: false, ...config },
    output_root: tmp,
    project: "p",
    group: "g",
    name: "n",
  });
  return session;
}

type Save = {
  id: string;
  step: number;
  dir: string;
  components: Array<{ name: string; path: string; kind: string }>;
};

/** Real torch.save files (resume opens them as `ckpt verify` does), one small tensor each. */
async function writeTargets(save: Save): Promise<void> {
  for (const c of save.components) {
    if (!["model", "optim", "trainer"].includes(c.name)) continue;
    await writeTorchFile(c.path, {
      tree: { step: save.step, [c.name]: { dtype: "U8", shape: [4] } },
      provideTensor: () => new Uint8Array(4),
      sync: false,
    });
  }
}

describe("SidecarSession", () => {
  it("refuses calls out of order with the session codes", async () => {
    const session = new SidecarSession({ log: () => {}, serverVersion: "test" });
    await expect(session.handle(req("resume"))).rejects.toMatchObject({ code: "PROTOCOL_HELLO_REQUIRED" });
    await call(session, "hello", { protocol: [1] });
    await expect(session.handle(req("begin_save", { step: 1 }))).rejects.toMatchObject({
      code: "SESSION_NOT_OPEN",
    });
    const open = await openSession();
    await expect(
      open.handle(req("open", { output_root: tmp, project: "p", group: "g", name: "n" })),
    ).rejects.toMatchObject({ code: "SESSION_ALREADY_OPEN" });
    expect(await open.handle(req("finalize"))).toEqual({ result: { finalized: true }, end: true });
    await expect(open.handle(req("should_stop"))).rejects.toMatchObject({ code: "SESSION_FINALIZED" });
  });

  it("lets save_every decide the cadence unless the loop states it", async () => {
    const session = await openSession();
    expect(await call(session, "begin_save", { step: 3 })).toEqual({
      save: null,
      reason: "nothing to save at step 3",
    });
    // The loop's own cadence counter says this step is a boundary although 3 % save_every != 0.
    const stated = (await call(session, "begin_save", { step: 3, cadence: true })).save as Save;
    expect(stated.step).toBe(3);
    await writeTargets(stated);
    await call(session, "commit", { save_id: stated.id });
    expect(await call(session, "begin_save", { step: 4, cadence: false })).toMatchObject({ save: null });
    const due = (await call(session, "begin_save", { step: 4 })).save as Save;
    expect(due).toMatchObject({ step: 4, kind: "full", reasons: ["cadence"], already_committed: false });
    await writeTargets(due);
    expect(await call(session, "commit", { save_id: due.id })).toMatchObject({
      status: "committed",
      iteration: 4,
      pointer_advanced: true,
    });
    await call(session, "finalize");
  });

  it("keeps one save open at a time and forgets a save once committed", async () => {
    const session = await openSession();
    const save = (await call(session, "begin_save", { step: 2 })).save as Save;
    await expect(session.handle(req("begin_save", { step: 4 }))).rejects.toMatchObject({
      code: "SAVE_IN_PROGRESS",
      kind: "refused",
    });
    await writeTargets(save);
    await call(session, "commit", { save_id: save.id });
    await expect(session.handle(req("commit", { save_id: save.id }))).rejects.toMatchObject({
      code: "SAVE_UNKNOWN",
    });
    await call(session, "finalize");
  });

  it("commits nothing for a save still open when the trainer goes away, and ends the manager", async () => {
    const session = await openSession();
    const first = (await call(session, "begin_save", { step: 2 })).save as Save;
    await writeTargets(first);
    await call(session, "commit", { save_id: first.id });
    const open = (await call(session, "begin_save", { step: 4 })).save as Save;
    await writeTargets(open); // every file written, but the trainer died before asking for the commit
    await session.abandon();
    const pointer = join(first.dir, "..", "latest_checkpoint.txt");
    expect(await readFile(pointer, "utf8")).toBe("iter_000000002");
    expect(logs.join("\n")).toContain("went away with 1 save(s) open");
    // The next session (the rerun) resumes from the last commit and redoes step 4.
    const rerun = await openSession();
    expect(await call(rerun, "resume")).toMatchObject({ kind: "checkpoint", iteration: 2 });
    const redo = (await call(rerun, "begin_save", { step: 4 })).save as Save;
    expect(redo.dir).toBe(open.dir);
    await writeTargets(redo);
    await call(rerun, "commit", { save_id: redo.id });
    expect(await readFile(pointer, "utf8")).toBe("iter_000000004");
    await call(rerun, "finalize");
    expect(existsSync(join(open.dir, ".posttrain-checkpoint.json"))).toBe(true);
  });

  it("passes the manager's refusals through with their codes", async () => {
    const session = await openSession();
    const save = (await call(session, "begin_save", { step: 2 })).save as Save;
    // Nothing written: the manager refuses to describe missing components.
    await expect(session.handle(req("commit", { save_id: save.id }))).rejects.toMatchObject({
      code: expect.stringMatching(/^MANAGER_/),
    });
    await call(session, "finalize");
    const bad = new SidecarSession({ log: () => {}, serverVersion: "test" });
    await call(bad, "hello", { protocol: [1] });
    await expect(
      bad.handle(
        req("open", {
          config: {
            checkpoint_format: "dcp",
            checkpoint_store: { backend: "object_store" },
            upload: { enabled: true },
          },
          output_root: tmp,
          project: "p",
          group: "g",
          name: "n",
        }),
      ),
    ).rejects.toMatchObject({ code: expect.stringMatching(/^MANAGER_CONFIG_/), kind: "input" });
  });
});
