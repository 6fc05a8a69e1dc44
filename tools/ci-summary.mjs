#!/usr/bin/env node
// Sums the vitest JSON reports in a directory into the one closing line CI reads:
//   ci: N passed, N failed
// A runner that failed without reporting a failed test (a crash, a config error) counts as one
// failure, so a broken run can never print "0 failed". Before it, a table of each package's line
// and branch coverage (coverage/<package>/coverage-summary.json, written by vitest.shared.ts).
// With `--tmp <before> <after> [own...]` (two `ls -A /tmp` listings, and names of the run's own
// services): every entry the tests added to /tmp is named, and litter counts as one failed test.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const [reportDir, runnerExit = "0", ...rest] = process.argv.slice(2);
if (!reportDir || (rest.length > 0 && (rest[0] !== "--tmp" || rest.length < 3))) {
  console.error(
    "usage: node tools/ci-summary.mjs <report-dir> [runner-exit-code] [--tmp <before> <after> [own-entry...]]",
  );
  process.exit(2);
}

/** Entries of `after` that are not in `before` nor the run's own. Pure. */
function tmpLitter(before, after, own) {
  const known = new Set([...before, ...own]);
  return after.filter((name) => !known.has(name)).sort();
}

const listing = (file) => readFileSync(file, "utf8").split("\n").filter(Boolean);
let passed = 0;
let failed = 0;
let skipped = 0;
const lines = [];
for (const file of readdirSync(reportDir)
  .filter((f) => f.endsWith(".json"))
  .sort()) {
  const report = JSON.parse(readFileSync(join(reportDir, file), "utf8"));
  const p = report.numPassedTests ?? 0;
  // A failed test counts once; a file that failed with no failed test (an import error, a hook)
  // counts as one more. numFailedTestSuites would count each failing test's describe blocks again.
  const brokenFiles = (report.testResults ?? []).filter(
    (r) => r.status === "failed" && !(r.assertionResults ?? []).some((a) => a.status === "failed"),
  ).length;
  const f = (report.numFailedTests ?? 0) + brokenFiles;
  const s = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  passed += p;
  failed += f;
  skipped += s;
  lines.push(
    `  ${file.replace(/\.json$/, "").padEnd(28)} ${String(p).padStart(5)} passed ${String(f).padStart(4)} failed ${String(s).padStart(3)} skipped`,
  );
}
if (Number(runnerExit) !== 0 && failed === 0) failed = 1;
console.log(lines.join("\n"));
if (rest.length > 0) {
  const [, before, after, ...own] = rest;
  const litter = tmpLitter(listing(before), listing(after), own);
  if (litter.length > 0) {
    console.log(`tests left ${litter.length} entries in /tmp (one failed test): ${litter.join(", ")}`);
    failed += 1;
  } else console.log("tests left nothing in /tmp");
}
const coverageDir = join(reportDir, "coverage");
if (existsSync(coverageDir)) {
  const rows = [];
  for (const name of readdirSync(coverageDir).sort()) {
    const file = join(coverageDir, name, "coverage-summary.json");
    if (!existsSync(file)) continue;
    const { total } = JSON.parse(readFileSync(file, "utf8"));
    if (total.lines.total === 0) continue; // no src/ of its own (the integration tests)
    const pct = (metric) => `${metric.pct.toFixed(1)}%`.padStart(7);
    rows.push(`  ${name.padEnd(28)} ${pct(total.lines)} lines ${pct(total.branches)} branches`);
  }
  if (rows.length > 0)
    console.log(["coverage (src/ of each package, by its own tests):", ...rows].join("\n"));
}
console.log(`ci: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 ? 1 : 0);
