import { cp, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { writeTorchFile } from "@ckpt/tensors";
import { onTestFinished } from "vitest";
import {
  CheckpointManager,
  type ComponentTargets,
  type ManagerEvent,
  type OpenOptions,
  parseManagerConfig,
  type SaveDue,
  type SaveSession,
} from "../src/index.js";

/** A temporary output root, removed when the test finishes. */
export { testdir as tempRoot } from "@ckpt/test-utils";

/** A clock that starts at 2026-09-01 12:00:00 UTC and advances `stepMs` per call. */
export function steppingClock(stepMs = 1000, start = Date.UTC(2026, 8, 1, 12, 0, 0)): () => Date {
  let now = start;
  return () => {
    const date = new Date(now);
    now += stepMs;
    return date;
  };
}

export interface Opened {
  manager: CheckpointManager;
  events: ManagerEvent[];
}

/** Rank-0 managers opened per output root, so the next one can stand for a rerun after they exited. */
const openedWriters = new Map<string, CheckpointManager[]>();

/**
 * Opens a manager on `outputRoot` with a raw config; signal handlers off (the test process keeps
 * its own). A rank-0 manager stands for the next run of the job: the rank-0 managers opened before
 * on the same root are finalized first (as their process would have exited), releasing the
 * attempt's writer lock. Two live writers are tested with `CheckpointManager.open` directly.
 */
export async function openManager(
  outputRoot: string,
  raw: Record<string, unknown>,
  extra: Partial<OpenOptions> = {},
): Promise<Opened> {
  const events: ManagerEvent[] = [];
  const writers = openedWriters.get(outputRoot) ?? [];
  const direct = (raw.checkpoint_store as { backend?: string } | undefined)?.backend === "object_store";
  // A direct primary's writers are guarded by the store lease, whose tests keep both writers open.
  if ((extra.rank ?? 0) === 0 && !direct) {
    for (const previous of writers.splice(0)) await previous.finalize().catch(() => {});
  }
  const manager = await CheckpointManager.open({
    config: parseManagerConfig(raw).config,
    outputRoot,
    project: "proj",
    group: "grp",
    name: "run",
    termination: { signals: false, sentinelPath: null },
    onEvent: (event) => events.push(event),
    ...extra,
  });
  if (manager.rank === 0) writers.push(manager);
  openedWriters.set(outputRoot, writers);
  onTestFinished(() => {
    openedWriters.delete(outputRoot);
    return manager.finalize().catch(() => {});
  });
  return { manager, events };
}

/** A real DCP checkpoint (two ranks' shards and `.metadata`, written by torch.distributed.checkpoint). */
export const DCP_FIXTURE = join(
  import.meta.dirname,
  "..",
  "..",
  "archive-reader",
  "test",
  "fixtures",
  "dcp-p2",
);

/**
 * Writes a real torch.save file holding one U8 tensor of `size` bytes (each `fill`) at every file
 * target and a real DCP directory (`DCP_FIXTURE`) at every directory target: resume opens them.
 */
export async function writeTargets(
  targets: ComponentTargets,
  options: { only?: ReadonlyArray<keyof ComponentTargets>; size?: number; fill?: number } = {},
): Promise<void> {
  const size = options.size ?? 64;
  const names = (options.only ?? (["model", "optim", "trainer"] as const)) as ReadonlyArray<
    keyof ComponentTargets
  >;
  for (const name of names) {
    const target = targets[name];
    if (target === undefined) continue;
    const bytes = Buffer.alloc(size, options.fill ?? name.charCodeAt(0));
    if (target.endsWith("/")) {
      await cp(DCP_FIXTURE, target, { recursive: true });
    } else {
      await mkdir(dirname(target), { recursive: true });
      await writeTorchFile(target, {
        tree: { state: { dtype: "U8", shape: [size] } },
        provideTensor: () => bytes,
        sync: false,
      });
    }
  }
}

/** Plans, begins, writes and commits one save; returns the session and outcome. */
export async function saveStep(manager: CheckpointManager, step: number, due: SaveDue, write = writeTargets) {
  const plan = manager.planSave(step, due);
  if (plan === undefined) return undefined;
  const session: SaveSession = await manager.beginSave(step, plan);
  await write(session.targets);
  const outcome = await manager.commitSave(session);
  return { plan, session, outcome };
}

/** A real torch.save zip (written by @ckpt/tensors) holding `scalars` and one small tensor under "net". */
export async function writeTorchState(
  path: string,
  scalars: Record<string, number | string> = {},
): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeTorchFile(path, {
    tree: { ...scalars, net: { w: { dtype: "F32", shape: [2] } } },
    provideTensor: () => new Uint8Array(8),
    sync: false,
  });
}

/** A legacy (undescribed) checkpoint directory whose model.pt, optim.pt and trainer.pt are real torch.save files. */
export async function writeLegacyDir(dir: string, trainer: Record<string, number> = {}): Promise<void> {
  await writeTorchState(join(dir, "model.pt"));
  await writeTorchState(join(dir, "optim.pt"));
  await writeTorchState(join(dir, "trainer.pt"), trainer);
}
