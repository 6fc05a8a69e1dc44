// Shared helpers for tools/bench/*.bench.mjs: timing, noise detection, page-cache control, tables.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

export const MiB = 1024 * 1024;
const TICKS_PER_SECOND = 100; // USER_HZ on Linux; /proc/stat and /proc/self/stat count in these

/** Busy CPU seconds of the whole machine (all but idle and iowait), from /proc/stat. */
export function machineBusySeconds() {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, _idle, _iowait, irq, softirq, steal] = fields;
  return (user + nice + system + irq + softirq + (steal ?? 0)) / TICKS_PER_SECOND;
}

/** CPU seconds of this process (all threads) plus its waited-for children. */
export function ownCpuSeconds() {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat
    .slice(stat.lastIndexOf(")") + 2)
    .split(" ")
    .map(Number);
  // After "(comm)": fields[11..14] are utime, stime, cutime, cstime.
  return (fields[11] + fields[12] + fields[13] + fields[14]) / TICKS_PER_SECOND;
}

/**
 * Runs `fn` and measures wall time plus the CPU other processes used meanwhile. A run is
 * contaminated when others used more than 0.3 s + 15 % of the wall time (the rule of
 * /work/shared/reference/perf-baseline.md), i.e. a busy neighbour may have slowed it.
 */
export async function measure(fn) {
  const busy0 = machineBusySeconds();
  const own0 = ownCpuSeconds();
  const t0 = process.hrtime.bigint();
  const value = await fn();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const own = ownCpuSeconds() - own0;
  const other = Math.max(0, machineBusySeconds() - busy0 - own);
  return { value, seconds, ownCpu: own, otherCpu: other, clean: other <= 0.3 + 0.15 * seconds };
}

/** Spawns a command, resolves with its stdout; rejects on a non-zero exit. */
export function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(" ")} exited ${code}: ${err}`)),
    );
  });
}

/** Drops the page cache (root only). Returns false when not permitted. */
export async function dropCaches() {
  await run("sync", []);
  try {
    writeFileSync("/proc/sys/vm/drop_caches", "3\n");
    return true;
  } catch {
    return false;
  }
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Prints rows (arrays of cells) as an aligned text table; numeric cells align right. */
export function printTable(header, rows) {
  const all = [header, ...rows].map((row) => row.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((row) => row[i].length)));
  const line = (row) =>
    row
      .map((cell, i) => (/^[-\d.×]+$/.test(cell) ? cell.padStart(widths[i]) : cell.padEnd(widths[i])))
      .join("  ");
  console.log(line(all[0]));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of all.slice(1)) console.log(line(row));
}
