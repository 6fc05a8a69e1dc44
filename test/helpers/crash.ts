// Crash injection: run a real command as a child process, SIGKILL it at a random instant drawn
// from a seeded PRNG, check invariants on what it left behind, resume, repeat.
//
//   CKPT_CRASH_SEED=<n>   replay a run (the seed is in the test name and in every failure)
//   CKPT_CRASH_KILLS=<n>  kills per suite (the archive suites never go below 100)
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { mulberry32, seedFrom } from "@ckpt/test-utils";

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/**
 * The built `ckpt` binary (`pnpm turbo run build`), or `$CKPT_CLI_BIN` (a pinned copy, e.g. a
 * bundle, so a rebuild of the workspace during a long local run cannot pull files from under it).
 */
export const CLI_BIN = process.env.CKPT_CLI_BIN ?? join(REPO_ROOT, "apps", "cli", "dist", "bin.js");

/** The seed of a crash suite: `$CKPT_CRASH_SEED`, else a fresh random one. */
export function crashSeed(): number {
  return seedFrom("CKPT_CRASH_SEED");
}

/** Kills per suite: `$CKPT_CRASH_KILLS` (default 100), never fewer than `min`. */
export function crashKills(min = 100, env: NodeJS.ProcessEnv = process.env): number {
  const given = env.CKPT_CRASH_KILLS;
  const wanted = given === undefined || given === "" ? 100 : Number(given);
  if (!Number.isInteger(wanted) || wanted < 1)
    throw new Error(`CKPT_CRASH_KILLS=${given}: expected a positive integer`);
  return Math.max(min, wanted);
}

/**
 * A suite's time bound for `kills`: `msPer100Kills` scaled by the kills over 100 (never less) and
 * by `$CKPT_CRASH_BUDGET_FACTOR` (default 1). The bounds in the tests are set for CI's 100 kills; a
 * soak (`tools/bench/crash-soak.bench.mjs`) asks for more kills on a machine it shares, and gets
 * proportionally more time.
 */
export function crashBudgetMs(
  msPer100Kills: number,
  kills: number,
  env: NodeJS.ProcessEnv = process.env,
): number {
  const given = env.CKPT_CRASH_BUDGET_FACTOR;
  const factor = given === undefined || given === "" ? 1 : Number(given);
  if (!(factor >= 1)) throw new Error(`CKPT_CRASH_BUDGET_FACTOR=${given}: expected a number ≥ 1`);
  return Math.round(msPer100Kills * Math.max(1, kills / 100) * factor);
}

/** One invocation: `node <args...>` (args[0] is the script, e.g. CLI_BIN), or `executable <args...>`. */
export interface NodeCommand {
  /** The program to run; default this Node binary (e.g. `/usr/bin/python3` for a trainer). */
  readonly executable?: string;
  readonly args: readonly string[];
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * Chooses the process to SIGKILL at the kill instant, given the pid of the command's process
 * (default: that process). Undefined means there is nothing to kill yet: no kill is delivered.
 */
export type KillVictim = (pid: number) => number | undefined;

/** The children of a process (Linux /proc), e.g. the sidecar a trainer spawned. */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter((p) => p !== "")
      .map(Number);
  } catch {
    return [];
  }
}

export interface RunResult {
  /** Exit code, or null when a signal ended the process. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Wall time from spawn to exit. */
  readonly ms: number;
  /** When the output first matched `armOn` (ms after spawn); undefined without it or when it never did. */
  readonly armedAtMs?: number | undefined;
  /** True when this harness delivered the SIGKILL (to the process, or to its victim, while it was still running). */
  readonly killed: boolean;
  /** True when the run overran `timeoutMs` and was killed for it (a hang: always a failure). */
  readonly timedOut: boolean;
}

const MAX_CAPTURE = 1 << 20; // keep at most 1 MiB of each stream; a report is a few KiB

/**
 * Runs `node <args>` and resolves when the process has exited and been reaped. With `killAtMs`
 * the process gets SIGKILL at that instant after spawn (after the first output matching `armOn`,
 * when given) unless it exited earlier. A run still going after `timeoutMs` is killed and
 * reported as `timedOut`.
 */
export function runNode(
  command: NodeCommand,
  options: { killAtMs?: number; timeoutMs?: number; victim?: KillVictim; armOn?: RegExp } = {},
): Promise<RunResult> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(command.executable ?? process.execPath, [...command.args], {
      cwd: command.cwd ?? REPO_ROOT,
      env: { ...process.env, NODE_NO_WARNINGS: "1", ...command.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let armedAtMs: number | undefined;
    const armIfMarked = () => {
      if (armedAtMs !== undefined || options.armOn === undefined) return;
      if (options.armOn.test(stdout) || options.armOn.test(stderr)) {
        armedAtMs = Number(process.hrtime.bigint() - started) / 1e6;
        arm();
      }
    };
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      if (stdout.length < MAX_CAPTURE) stdout += d;
      armIfMarked();
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      if (stderr.length < MAX_CAPTURE) stderr += d;
      armIfMarked();
    });
    let killed = false;
    let killedOther = false;
    let timedOut = false;
    let exited = false;
    let killTimer: NodeJS.Timeout | undefined;
    const arm = () => {
      if (options.killAtMs === undefined) return;
      killTimer = setTimeout(() => {
        if (exited) return;
        const pid = options.victim === undefined ? child.pid : options.victim(child.pid!);
        if (pid === child.pid) killed = child.kill("SIGKILL");
        else if (pid !== undefined) {
          try {
            process.kill(pid, "SIGKILL");
            killedOther = true;
          } catch {
            // the victim had already exited: no kill was delivered
          }
        }
      }, options.killAtMs);
    };
    if (options.armOn === undefined) arm();
    const hangTimer = setTimeout(() => {
      if (!exited) {
        timedOut = true;
        child.kill("SIGKILL");
      }
    }, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(killTimer);
      clearTimeout(hangTimer);
      reject(error);
    });
    child.on("exit", () => {
      exited = true;
      // A grandchild holding the pipes would delay "close" forever: stop waiting for them.
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, 2_000).unref();
    });
    // "close" comes after "exit" and after both pipes are drained: the process is reaped.
    child.on("close", (code, signal) => {
      clearTimeout(killTimer);
      clearTimeout(hangTimer);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      resolve({
        code,
        signal,
        stdout,
        stderr,
        ms,
        armedAtMs,
        killed: ((killed && signal === "SIGKILL") || killedOther) && !timedOut,
        timedOut,
      });
    });
  });
}

/** The CLI: `node apps/cli/dist/bin.js <args>`. */
export function cli(args: readonly string[], extra: Omit<NodeCommand, "args"> = {}): NodeCommand {
  return { ...extra, args: [CLI_BIN, ...args] };
}

interface KillContext {
  readonly seed: number;
  readonly round: number;
  /** 0-based index of this kill in the suite. */
  readonly kill: number;
  /** 1-based index of the attempt (the n-th number drawn from the seed). */
  readonly attempt: number;
  /** Where in [0, duration] the kill was aimed, as a fraction (replayable from the seed). */
  readonly fraction: number;
  readonly atMs: number;
  readonly result: RunResult;
}

interface CompletionContext {
  readonly seed: number;
  readonly round: number;
  /** Kills this round had taken before this run. */
  readonly killsInRound: number;
  /** What the run before this one did: nothing (fresh state), was killed, or completed. */
  readonly previous: "fresh" | "killed" | "completed";
  readonly result: RunResult;
}

export interface CrashSuite {
  readonly seed: number;
  /** SIGKILLs to deliver (to a process that was still running). */
  readonly kills: number;
  /** Kills between two runs to completion (a round). Default 3. */
  readonly killsPerRound?: number;
  /** The command of one run in `round` (the same for the kills and the completion of a round). */
  readonly command: (round: number) => NodeCommand;
  /** Fresh state for a round (called before calibration runs too, with round -1, -2, ...). */
  readonly prepare: (round: number) => Promise<void>;
  /** Invariants after a SIGKILL; may return a label of the state found (counted in the report). */
  readonly afterKill: (ctx: KillContext) => Promise<string | undefined>;
  /** Invariants after a run that was not killed (it must have succeeded). */
  readonly afterCompletion: (ctx: CompletionContext) => Promise<void>;
  /** Uninterrupted runs measured before the kills; their median sets the kill window. Default 2. */
  readonly calibrationRuns?: number;
  /**
   * A command that only starts the program and exits (`ckpt --version`). When given, its median
   * time S is measured too, and the kill instants are spread so the work after start-up gets
   * most of them: a share `earlyShare` (default 0.1) of the kills is uniform in [0, S], the rest
   * uniform in [0.9·S, D]. Without it every kill is uniform in [0, D].
   */
  readonly startup?: NodeCommand;
  readonly earlyShare?: number;
  /**
   * Instead of `startup`: a marker the program prints when its start-up is over (e.g. a trainer
   * after importing torch). The run time D is then measured from the marker to the exit, and
   * every kill is uniform in [0, D] after the marker, however long a busy machine takes to start.
   */
  readonly armOn?: RegExp;
  /**
   * Whether a state label (from `afterKill`) means the kill left the state exactly as `prepare`
   * made it: the run had not begun its work. A round whose kills all found such a state ends with
   * what is in effect a fresh run, so that run is timed like one. Without this, a machine that
   * slows down after calibration gets every kill before the work and never shows it.
   */
  readonly untouched?: (label: string) => boolean;
  /** Another process to SIGKILL at the kill instant (e.g. a child of the command); see KillVictim. */
  readonly victim?: KillVictim;
  /** Bound of one run. Default 60 s. */
  readonly runTimeoutMs?: number;
  /** Bound of the whole suite; running out before `kills` fails. Default 240 s. */
  readonly budgetMs?: number;
  readonly log?: (line: string) => void;
  /** Called for every attempt, killed or not: where it was aimed (for replay checks). */
  readonly onAttempt?: (aim: { attempt: number; fraction: number; atMs: number; killed: boolean }) => void;
}

export interface CrashReport {
  readonly seed: number;
  readonly kills: number;
  readonly rounds: number;
  /** Runs that exited before their kill instant (counted as completions, not kills). */
  readonly exitedBeforeKill: number;
  readonly completions: number;
  /** Median uninterrupted run time (of the last five from fresh state) at the end of the suite. */
  readonly windowMs: number;
  /** Start-up time at the end of the suite: its calibrated share of `windowMs` (0 without a `startup` command). */
  readonly startupMs: number;
  /** Kills aimed into start-up [0, S] and into the work [0.9·S, D]. */
  readonly earlyKills: number;
  readonly workKills: number;
  /** Rounds whose kills all found the prepared state, so their completion re-timed the window. */
  readonly retimedRounds: number;
  /** Invariant checks passed: one after every kill and one after every run to completion. */
  readonly checks: number;
  readonly elapsedMs: number;
  /** How many kills found each state label. */
  readonly states: Readonly<Record<string, number>>;
}

/** An invariant violation, with everything needed to replay it. */
export class CrashInvariantError extends Error {
  override readonly name = "CrashInvariantError";
}

function describeRun(result: RunResult): string {
  const tail = (text: string) => text.trim().split("\n").slice(-15).join("\n");
  return `exit ${result.code ?? result.signal} after ${result.ms.toFixed(0)} ms\n--- stdout\n${tail(result.stdout)}\n--- stderr\n${tail(result.stderr)}`;
}

/**
 * Runs a crash suite: calibrate (median of uninterrupted runs), then rounds of up to
 * `killsPerRound` SIGKILLs at instants drawn from mulberry32(seed) (see `startup`), each
 * followed by `afterKill`, and a run to completion that must succeed, followed by
 * `afterCompletion`. Bounded by `kills * 4` attempts and `budgetMs`.
 */
export async function runCrashSuite(suite: CrashSuite): Promise<CrashReport> {
  const began = Date.now();
  const budgetMs = suite.budgetMs ?? 240_000;
  const runTimeoutMs = suite.runTimeoutMs ?? 60_000;
  const killsPerRound = Math.max(1, suite.killsPerRound ?? 3);
  const log = suite.log ?? (() => {});
  const random = mulberry32(suite.seed);
  const replay = `replay: CKPT_CRASH_SEED=${suite.seed} CKPT_CRASH_KILLS=${suite.kills}`;
  const fail = (where: string, error: unknown): never => {
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    throw new CrashInvariantError(`${where} (${replay}): ${message}`);
  };
  const mustSucceed = (where: string, result: RunResult) => {
    if (result.timedOut) fail(where, `run hung for ${runTimeoutMs} ms\n${describeRun(result)}`);
    if (result.code !== 0) fail(where, `run failed\n${describeRun(result)}`);
  };

  if (suite.armOn !== undefined && suite.startup !== undefined) {
    throw new Error("a crash suite takes either startup or armOn, not both");
  }
  /** The part of a run the kills aim at: all of it, or what follows the armOn marker. */
  const workMs = (where: string, result: RunResult): number => {
    if (suite.armOn === undefined) return result.ms;
    if (result.armedAtMs === undefined)
      fail(where, `the output never matched ${suite.armOn}\n${describeRun(result)}`);
    return result.ms - result.armedAtMs!;
  };
  let checks = 0;
  /** An invariant check: counted when it passes, a replayable failure when it does not. */
  const checked = <T>(where: string, check: Promise<T>): Promise<T> =>
    check.then(
      (value) => {
        checks++;
        return value;
      },
      (error: unknown) => fail(where, error),
    );
  // Calibration: the duration of an uninterrupted run from fresh state.
  const durations: number[] = [];
  const calibrationRuns = Math.max(1, suite.calibrationRuns ?? 2);
  for (let i = 1; i <= calibrationRuns; i++) {
    await suite.prepare(-i);
    const result = await runNode(suite.command(-i), {
      timeoutMs: runTimeoutMs,
      ...(suite.armOn === undefined ? {} : { armOn: suite.armOn }),
    });
    mustSucceed(`calibration run ${i}`, result);
    await checked(
      `calibration run ${i}`,
      suite.afterCompletion({ seed: suite.seed, round: -i, killsInRound: 0, previous: "fresh", result }),
    );
    durations.push(workMs(`calibration run ${i}`, result));
  }
  const median = (values: number[]) =>
    [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;
  // The run time D follows the machine: the median of the last uninterrupted runs from fresh
  // state (calibration, then every first attempt of a round that finished before its kill).
  const fresh = [...durations];
  let windowMs = median(fresh);
  let startupMs = 0;
  if (suite.startup !== undefined) {
    const starts: number[] = [];
    for (let i = 1; i <= calibrationRuns; i++) {
      const result = await runNode(suite.startup, { timeoutMs: runTimeoutMs });
      mustSucceed(`start-up calibration ${i}`, result);
      starts.push(result.ms);
    }
    // On a noisy machine start-up can measure close to (or above) a whole run: keep at least
    // the last quarter of the run in the work window.
    startupMs = Math.min(median(starts), (windowMs / 0.9) * 0.75);
  }
  const earlyShare = suite.startup === undefined ? 1 : (suite.earlyShare ?? 0.1);
  // Start-up follows the machine as the run time does, as the same share of a run: calibrated on a
  // loaded machine that later quietens, a fixed start-up would aim every work kill past the end.
  const startupShare = startupMs / windowMs;
  const workFrom = () => 0.9 * startupShare * windowMs;
  log(
    suite.armOn !== undefined
      ? `crash suite seed ${suite.seed}: run ${windowMs.toFixed(0)} ms after the output matches ${suite.armOn} ` +
          `(median of ${calibrationRuns}); kills uniform in [0, ${windowMs.toFixed(0)}] ms after it`
      : `crash suite seed ${suite.seed}: run ${windowMs.toFixed(0)} ms, start-up ${startupMs.toFixed(0)} ms ` +
          `(medians of ${calibrationRuns}); ${Math.round(earlyShare * 100)}% of kills in [0, ${(suite.startup === undefined ? windowMs : startupMs).toFixed(0)}] ms, ` +
          `the rest in [${workFrom().toFixed(0)}, ${windowMs.toFixed(0)}] ms`,
  );
  /** The kill instant of one attempt: two numbers from the seeded generator. */
  const aim = (): { fraction: number; atMs: number; early: boolean } => {
    const early = random() < earlyShare;
    const fraction = random();
    if (suite.startup === undefined) return { fraction, atMs: fraction * windowMs, early: true };
    const from = workFrom();
    return early
      ? { fraction, atMs: fraction * startupShare * windowMs, early }
      : { fraction, atMs: from + fraction * Math.max(50, windowMs - from), early };
  };

  const states: Record<string, number> = {};
  let kills = 0;
  let rounds = 0;
  let exitedBeforeKill = 0;
  let completions = 0;
  let attempts = 0;
  let earlyKills = 0;
  let workKills = 0;
  let retimed = 0;
  const maxAttempts = suite.kills * 4 + 10;
  while (kills < suite.kills) {
    const round = rounds++;
    await suite.prepare(round);
    const command = suite.command(round);
    let killsInRound = 0;
    let untouchedKills = 0;
    let previous: CompletionContext["previous"] = "fresh";
    for (let k = 0; k < killsPerRound && kills < suite.kills; k++) {
      if (++attempts > maxAttempts)
        fail("suite", `gave up after ${attempts} attempts with ${kills} kills in ${rounds} rounds`);
      if (Date.now() - began > budgetMs)
        fail(
          "suite",
          `time budget ${budgetMs} ms spent with ${kills} kills in ${attempts} attempts, ${rounds} rounds (run ${windowMs.toFixed(0)} ms)`,
        );
      const { fraction, atMs, early } = aim();
      const result = await runNode(command, {
        killAtMs: atMs,
        timeoutMs: runTimeoutMs,
        ...(suite.victim === undefined ? {} : { victim: suite.victim }),
        ...(suite.armOn === undefined ? {} : { armOn: suite.armOn }),
      });
      suite.onAttempt?.({ attempt: attempts, fraction, atMs, killed: result.killed });
      const where = `round ${round} attempt ${attempts} kill ${kills} at ${atMs.toFixed(1)} ms (u=${fraction.toFixed(4)}, ${early ? "early" : "work"} window; run ${windowMs.toFixed(0)} ms, start-up ${(startupShare * windowMs).toFixed(0)} ms)`;
      if (result.killed) {
        if (early) earlyKills++;
        else workKills++;
        const label = await checked(
          where,
          suite.afterKill({
            seed: suite.seed,
            round,
            kill: kills,
            attempt: attempts,
            fraction,
            atMs,
            result,
          }),
        );
        states[label ?? "unlabelled"] = (states[label ?? "unlabelled"] ?? 0) + 1;
        if (label !== undefined && suite.untouched?.(label)) untouchedKills++;
        kills++;
        killsInRound++;
        previous = "killed";
        continue;
      }
      // It finished before the kill instant: that is a completion of the round.
      mustSucceed(where, result);
      if (previous === "fresh") {
        fresh.push(workMs(where, result));
        windowMs = median(fresh.slice(-5));
      }
      await checked(
        where,
        suite.afterCompletion({ seed: suite.seed, round, killsInRound, previous, result }),
      );
      exitedBeforeKill++;
      previous = "completed";
      break;
    }
    const result = await runNode(command, { timeoutMs: runTimeoutMs });
    const where = `round ${round} completion after ${killsInRound} kills`;
    mustSucceed(where, result);
    if (killsInRound > 0 && untouchedKills === killsInRound) {
      // One such round is evidence enough that the window ends too early: take this run's time
      // at once rather than waiting for it to win the median.
      const ms = workMs(where, result);
      fresh.push(ms);
      windowMs = Math.max(median(fresh.slice(-5)), ms);
      retimed++;
    }
    await checked(where, suite.afterCompletion({ seed: suite.seed, round, killsInRound, previous, result }));
    completions++;
  }
  const report: CrashReport = {
    seed: suite.seed,
    kills,
    rounds,
    exitedBeforeKill,
    completions,
    windowMs,
    startupMs: startupShare * windowMs,
    earlyKills,
    workKills,
    retimedRounds: retimed,
    checks,
    elapsedMs: Date.now() - began,
    states,
  };
  log(`crash suite done: ${JSON.stringify(report)}`);
  return report;
}
