// Runs every tools/bench/*.bench.mjs, or the ones named: `pnpm bench` / `pnpm bench hash`.
// Each benchmark runs in its own process so one cannot warm or pollute another's measurements.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here)
  .filter((name) => name.endsWith(".bench.mjs"))
  .map((name) => name.slice(0, -".bench.mjs".length))
  .sort();
const args = process.argv.slice(2);
const names = args.filter((arg) => !arg.startsWith("-"));
const unknown = names.filter((name) => !available.includes(name));
if (unknown.length > 0) {
  console.error(`unknown benchmark ${unknown.join(", ")}; available: ${available.join(", ")}`);
  process.exit(2);
}
let failed = 0;
for (const name of names.length > 0 ? names : available) {
  console.log(`\n=== bench ${name} ===`);
  const result = spawnSync(
    process.execPath,
    [join(here, `${name}.bench.mjs`), ...args.filter((a) => a.startsWith("-"))],
    {
      stdio: "inherit",
    },
  );
  if (result.status !== 0) {
    console.error(`bench ${name} failed (exit ${result.status ?? result.signal})`);
    failed++;
  }
}
process.exit(failed > 0 ? 1 : 0);
