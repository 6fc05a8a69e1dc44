// Crash soak: the crash suites of test/ (the same invariants CI checks with its bounded counts),
// run once each with a larger kill count so that one run delivers --kills SIGKILLs (default 1,000)
// spread over publish, fetch, manager saves, merge, materialize and the FSDP2 example trainer
// (both its ranks, local DCP and direct to S3). Each suite runs in its own vitest process with
// CKPT_CRASH_KILLS set; the table lists per suite the kills delivered, the
// invariant checks passed (one after every kill and after every run to completion), the
// violations (a suite stops at its first, which names the seed to replay) and the wall seconds of
// the suite's process (its fixtures included).
// The CLI under test is pinned (bundled) so a rebuild during the run cannot change it.
// Build first: pnpm turbo run build. The archive suites' test files also hold S3 suites, which are
// filtered out here, but vitest's S3 global setup still runs: give it a server (source the
// AWS_* / CKPT_TEST_S3_BUCKET environment) or it starts a private Ceph for the run.
// Each suite's time bound is its CI bound scaled by its kills and by --budget-factor (default 3:
// a soak shares the machine). --logs DIR keeps each suite's full output as DIR/<suite>.log.
//   node tools/bench/crash-soak.bench.mjs [--kills N] [--suites publish,fetch,...] [--seed S] [--jobs J]
//     [--budget-factor F] [--logs DIR]
// Target: ≥ 1,000 kills in one run, 0 violations.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { pinnedCli, printTable } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..");

/**
 * The suites: the package directory (default test/), its test file and the vitest name filter of
 * the crash suite. The FSDP2 ones SIGKILL both ranks of apps/trainer-binding/examples/train_fsdp2.py
 * inside saves, locally with DCP and direct to the S3 server (test_dcp.crash_loop).
 */
const SUITES = {
  publish: { file: "archive/crash-publish.test.ts", filter: "file://" },
  fetch: { file: "archive/crash-fetch.test.ts", filter: "file://" },
  manager: { file: "manager/crash-manager.test.ts", filter: "SIGKILL" },
  merge: { file: "merge/crash-merge.test.ts", filter: "SIGKILL" },
  materialize: { file: "hf/crash-materialize.test.ts", filter: "SIGKILL" },
  "fsdp2-dcp": { dir: "apps/trainer-binding", file: "test/dcp.test.ts", filter: "sigkilled_inside_saves" },
  "fsdp2-direct": { dir: "apps/trainer-binding", file: "test/direct.s3.test.ts", filter: "killed_mid_save" },
};

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log(
    "node tools/bench/crash-soak.bench.mjs [--kills N] [--suites publish,fetch,manager,merge,materialize]\n" +
      "  [--seed S] [--jobs J] [--budget-factor F] [--logs DIR]\n" +
      "Runs the crash suites of test/ with CKPT_CRASH_KILLS = ceil(N / suites) each (default N 1000; the\n" +
      "archive suites never go below 100) and prints kills, checks, violations and seconds per suite.",
  );
  process.exit(0);
}

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const TOTAL_KILLS = Number(option("kills", "1000"));
const NAMES = option("suites", Object.keys(SUITES).join(",")).split(",");
const JOBS = Math.max(1, Number(option("jobs", "1")));
const SEED = option("seed", String(Math.floor(Math.random() * 2 ** 31)));
const BUDGET_FACTOR = option("budget-factor", "3");
const LOGS = option("logs", undefined);
for (const name of NAMES) {
  if (!(name in SUITES)) {
    console.error(`unknown suite ${name}; available: ${Object.keys(SUITES).join(", ")}`);
    process.exit(2);
  }
}
if (!Number.isInteger(TOTAL_KILLS) || TOTAL_KILLS < NAMES.length) {
  console.error(`--kills ${TOTAL_KILLS}: expected an integer of at least one per suite`);
  process.exit(2);
}
const perSuite = Math.ceil(TOTAL_KILLS / NAMES.length);

/** Runs one suite's vitest process; resolves with its report lines, exit code and output tail. */
function runSuite(name, cliBin) {
  const { dir = "test", file, filter } = SUITES[name];
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [join(repo, "node_modules", "vitest", "vitest.mjs"), "run", file, "-t", filter],
      {
        cwd: join(repo, dir),
        env: {
          ...process.env,
          CKPT_CRASH_KILLS: String(perSuite),
          CKPT_CRASH_SEED: SEED,
          CKPT_CRASH_BUDGET_FACTOR: BUDGET_FACTOR,
          CKPT_CLI_BIN: cliBin,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    const log = LOGS === undefined ? undefined : createWriteStream(join(LOGS, `${name}.log`));
    const collect = (d) => {
      out += d;
      log?.write(d);
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    child.on("error", reject);
    child.on("close", (code) => {
      log?.end();
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const reports = [...out.matchAll(/crash suite done: (\{.*\})/g)].map((m) => JSON.parse(m[1]));
      const violation = out.match(/CrashInvariantError: ([^\n]*)/)?.[1];
      resolve({ name, code, seconds, reports, violation, tail: out.slice(-4000) });
    });
  });
}

const scratch = await mkdtemp(join(tmpdir(), "ckpt-bench-soak-"));
try {
  const cliBin = await pinnedCli(scratch);
  if (LOGS !== undefined) await mkdir(LOGS, { recursive: true });
  console.log(
    `crash soak: ${perSuite} kills × ${NAMES.length} suites (${NAMES.join(", ")}), seed ${SEED}, ${JOBS} at a time`,
  );
  const queue = [...NAMES];
  const results = [];
  const began = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: Math.min(JOBS, queue.length) }, async () => {
      while (queue.length > 0) {
        const name = queue.shift();
        const result = await runSuite(name, cliBin);
        console.log(
          `  ${name}: exit ${result.code} after ${result.seconds.toFixed(0)} s, ` +
            `${result.reports.reduce((n, r) => n + r.kills, 0)} kills`,
        );
        results.push(result);
      }
    }),
  );
  const wall = Number(process.hrtime.bigint() - began) / 1e9;
  results.sort((a, b) => NAMES.indexOf(a.name) - NAMES.indexOf(b.name));
  const rows = results.map((r) => {
    const sum = (field) => r.reports.reduce((n, report) => n + report[field], 0);
    const failed = r.code !== 0;
    return [
      r.name,
      sum("kills"),
      sum("checks"),
      failed ? (r.violation === undefined ? "error" : "1") : "0",
      r.seconds.toFixed(0),
      sum("rounds"),
      r.reports.map((report) => report.windowMs.toFixed(0)).join(","),
    ];
  });
  const total = (i) => rows.reduce((n, row) => n + Number(row[i]), 0);
  // Summed before the total row joins the rows.
  const kills = total(1);
  rows.push([
    "total",
    kills,
    total(2),
    String(results.filter((r) => r.code !== 0).length),
    wall.toFixed(0),
    total(5),
    "",
  ]);
  console.log("");
  printTable(["suite", "kills", "checks", "violations", "seconds", "rounds", "run ms"], rows);
  const failures = results.filter((r) => r.code !== 0);
  for (const r of failures) {
    console.log(`\n--- ${r.name} failed (exit ${r.code})${r.violation ? `: ${r.violation}` : ""}\n${r.tail}`);
  }
  console.log(
    `\n${kills} kills, ${failures.length} failed suites: ${kills >= 1000 && failures.length === 0 ? "meets" : "misses"} the target (≥ 1,000 kills, 0 violations)`,
  );
  process.exitCode = failures.length === 0 ? 0 : 1;
} finally {
  await rm(scratch, { recursive: true, force: true });
}
