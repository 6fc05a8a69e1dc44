// Shared helpers for tools/bench/*.bench.mjs: timing, noise detection, page-cache control, tables.
import { spawn } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

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

const PAGE_REPORTING_MIN_FREE_MS = "/sys/module/page_reporting/parameters/min_free_ms";

/**
 * Takes free memory back into this guest before a timed sample. On these VMs (virtio_balloon free
 * page reporting) memory left free for a moment goes back to the host, and the next run to use it
 * (for the page cache of the files it writes) pays the host's faults: 0.8-1.2 s of system time per
 * GiB, charged to whichever side of a comparison runs first after a pause. Writing and deleting
 * `bytes` of a scratch file in `dir` refaults that much, so every sample starts on equal terms.
 */
export async function warmFreeMemory(dir, bytes) {
  const { open, unlink } = await import("node:fs/promises");
  const path = join(dir, "warm-free-memory");
  const chunk = Buffer.alloc(8 * MiB, 1);
  const handle = await open(path, "w");
  try {
    for (let done = 0; done < bytes; done += chunk.length) await handle.write(chunk);
  } finally {
    await handle.close();
    await unlink(path);
  }
}

/**
 * Keeps memory freed during the benchmark in this guest for 5 minutes (root only, where the knob
 * exists), so that warmFreeMemory's pages are still there when a sample starts; without it they go
 * back within a second. Returns the function that restores the setting; says what it did.
 */
export function holdFreeMemory() {
  let before;
  try {
    before = readFileSync(PAGE_REPORTING_MIN_FREE_MS, "utf8").trim();
  } catch {
    return () => {};
  }
  try {
    writeFileSync(PAGE_REPORTING_MIN_FREE_MS, "300000\n");
  } catch {
    console.log(
      `note: free memory goes back to the host after ${before} ms (${PAGE_REPORTING_MIN_FREE_MS}) and this is not root: expect noisy samples`,
    );
    return () => {};
  }
  console.log(
    `(free memory held in the guest for 5 minutes during the run: ${PAGE_REPORTING_MIN_FREE_MS} ${before} -> 300000)`,
  );
  return () => writeFileSync(PAGE_REPORTING_MIN_FREE_MS, `${before}\n`);
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

/**
 * Runs one process under `/usr/bin/time`: wall seconds (measured here, start-up included), peak
 * RSS, the process's own CPU, the CPU other processes used meanwhile (minus `excludeCpu()`, e.g.
 * a local server's), the noise verdict of {@link measure} and stdout. Rejects on a non-zero exit.
 */
export function timedProcess(command, args, options = {}) {
  const { excludeCpu = () => 0, ...spawnOptions } = options;
  const report = join(tmpdir(), `ckpt-bench-time-${process.pid}-${process.hrtime.bigint()}`);
  return new Promise((resolve, reject) => {
    const busy0 = machineBusySeconds();
    const excluded0 = excludeCpu();
    const t0 = process.hrtime.bigint();
    const child = spawn("/usr/bin/time", ["-f", "%M %U %S", "-o", report, command, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      ...spawnOptions,
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      let fields = [Number.NaN, 0, 0];
      try {
        fields = readFileSync(report, "utf8").trim().split("\n").at(-1).split(" ").map(Number);
        rmSync(report, { force: true });
      } catch {}
      const [rssKiB, user, sys] = fields;
      const own = user + sys;
      const other = Math.max(0, machineBusySeconds() - busy0 - own - (excludeCpu() - excluded0));
      if (code !== 0) {
        reject(
          new Error(`${command} ${args.join(" ")} exited ${code}:\n${out.slice(-2000)}\n${err.slice(-2000)}`),
        );
        return;
      }
      resolve({
        seconds,
        rssMiB: rssKiB / 1024,
        ownCpu: own,
        otherCpu: other,
        clean: other <= 0.3 + 0.15 * seconds,
        out,
      });
    });
  });
}

const REPO = join(import.meta.dirname, "..", "..");
/** The built `ckpt` (apps/cli/dist/bin.js). */
export const CLI_DIST = join(REPO, "apps", "cli", "dist", "bin.js");

/**
 * The CLI under test, pinned: bundled from the built dist into `dir` with esbuild (tsup's, so
 * nothing extra is installed), so a rebuild of the workspace during a run (tsup empties dist
 * first) cannot break it. Without esbuild it refuses rather than silently running the live dist.
 */
export async function pinnedCli(dir) {
  let esbuild;
  try {
    const fromTsup = createRequire(createRequire(join(REPO, "package.json")).resolve("tsup/package.json"));
    esbuild = await import(pathToFileURL(fromTsup.resolve("esbuild")).href);
  } catch (error) {
    throw new Error(`pin the CLI: esbuild (tsup's) is not installed: ${error.message}. Run pnpm install.`);
  }
  const out = join(dir, "ckpt-cli.mjs");
  await esbuild.build({
    entryPoints: [CLI_DIST],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: out,
    logLevel: "error",
    banner: {
      js: "import { createRequire as __ckptRequire } from 'node:module'; const require = __ckptRequire(import.meta.url);",
    },
  });
  return out;
}
