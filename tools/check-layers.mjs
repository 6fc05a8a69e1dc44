#!/usr/bin/env node
// Fails (exit 1) when a package's imports or workspace dependencies break the layer picture.
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkUnit, pictureProblems, readWorkspace } from "./layers.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const units = readWorkspace(root);
const problems = [
  ...units.flatMap(checkUnit),
  ...pictureProblems(units, readFileSync(join(root, "docs/architecture.md"), "utf8")),
];
if (problems.length > 0) {
  for (const problem of problems) console.error(`layers: ${problem}`);
  console.error(`layers: ${problems.length} problem(s); see docs/architecture.md for the allowed edges`);
  process.exit(1);
}
console.log(`layers: ${units.length} workspace units follow the layer picture`);
