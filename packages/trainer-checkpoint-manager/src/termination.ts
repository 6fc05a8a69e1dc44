import { statSync } from "node:fs";
import { join } from "node:path";
import type { StopReason, TerminationOptions } from "./types.js";

/** The file a batch script's USR1 trap touches on the shared filesystem. */
export const SENTINEL_FILE = "SIGUSR1_RECEIVED";

function sentinelTime(path: string): number | undefined {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** The sentinel path a watch uses: the option, else `$SLURM_LOG_DIR/SIGUSR1_RECEIVED`, else none. Pure. */
export function sentinelPathFor(
  options: TerminationOptions | undefined,
  env: NodeJS.ProcessEnv,
): string | undefined {
  if (options?.sentinelPath !== undefined) return options.sentinelPath ?? undefined;
  const dir = env.SLURM_LOG_DIR;
  return dir === undefined || dir === "" ? undefined : join(dir, SENTINEL_FILE);
}

/**
 * Watches for a termination request: the sentinel file (Slurm's USR1 does not reach a container;
 * the batch script's trap writes the file instead) and, for runs outside containers, SIGUSR1 and
 * SIGTERM, whose handlers only set a flag. The loop polls at step boundaries; the first reason
 * seen stays. A sentinel present before the watch started counts only once touched again.
 */
export class TerminationWatch {
  private reason: StopReason | undefined;
  private readonly initialSentinel: number | undefined;
  private readonly handlers: Array<[NodeJS.Signals, () => void]> = [];

  constructor(
    private readonly sentinelPath: string | undefined,
    signals: boolean,
    private readonly onStop: (reason: StopReason) => void,
  ) {
    this.initialSentinel = sentinelPath === undefined ? undefined : sentinelTime(sentinelPath);
    if (signals) {
      for (const signal of ["SIGUSR1", "SIGTERM"] as const) {
        const handler = () => this.flag({ kind: "signal", signal });
        process.on(signal, handler);
        this.handlers.push([signal, handler]);
      }
    }
  }

  private flag(reason: StopReason): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.onStop(reason);
  }

  /** The termination request seen so far, checking the sentinel file now. */
  poll(): StopReason | undefined {
    if (this.reason === undefined && this.sentinelPath !== undefined) {
      const time = sentinelTime(this.sentinelPath);
      if (time !== undefined && time !== this.initialSentinel)
        this.flag({ kind: "sentinel", path: this.sentinelPath });
    }
    return this.reason;
  }

  /** Removes the signal handlers (the process's default dispositions come back). */
  stop(): void {
    for (const [signal, handler] of this.handlers) process.off(signal, handler);
    this.handlers.length = 0;
  }
}
