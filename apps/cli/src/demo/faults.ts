// The demo's injected faults on a committed checkpoint: what storage does to files after the fact.
// `torn`: optim.pt keeps its size but its second half never reached the disk (zeros), as after a
// lost write-back; only reading it can tell. `short`: model.pt is cut to half its length, as after
// a copy that stopped; its recorded size tells.
import { open, stat, truncate } from "node:fs/promises";
import { join } from "node:path";

const DEMO_FAULTS = ["kill", "torn", "short", "clean"] as const;
export type DemoFault = (typeof DEMO_FAULTS)[number];

export interface InjectedFault {
  readonly mode: DemoFault;
  /** What was done, in one sentence. */
  readonly what: string;
  /** The damaged file (torn, short) or the killed process's save directory (kill). */
  readonly path?: string;
  readonly size_before?: number;
  readonly size_after?: number;
}

/** Zeroes the second half of `<iterDir>/optim.pt` in place (size unchanged). */
export async function tearComponent(iterDir: string): Promise<InjectedFault> {
  const path = join(iterDir, "optim.pt");
  const { size } = await stat(path);
  const from = Math.floor(size / 2);
  const handle = await open(path, "r+");
  try {
    await handle.write(new Uint8Array(size - from), 0, size - from, from);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return {
    mode: "torn",
    what: `zeroed bytes ${from}..${size} of optim.pt (its size is unchanged)`,
    path,
    size_before: size,
    size_after: size,
  };
}

/** Cuts `<iterDir>/model.pt` to half its length. */
export async function truncateShard(iterDir: string): Promise<InjectedFault> {
  const path = join(iterDir, "model.pt");
  const { size } = await stat(path);
  const after = Math.floor(size / 2);
  await truncate(path, after);
  return {
    mode: "short",
    what: `truncated model.pt from ${size} to ${after} bytes`,
    path,
    size_before: size,
    size_after: after,
  };
}
