#!/usr/bin/env node
// The public surface of every published package, as an API Extractor report committed beside it
// (packages/<name>/etc/<name>.api.md), so a change to a surface shows in review.
//   node tools/api-report.mjs           fails when a built surface differs from its report (pnpm api:check)
//   node tools/api-report.mjs --update  rewrites the reports (pnpm api:update)
//   ... [names]                         only these packages (directory names under packages/)
// Reads dist/index.d.ts: run it after `pnpm build`.
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Extractor, ExtractorConfig } from "@microsoft/api-extractor";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const update = process.argv.includes("--update");
const only = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));

/** Every package under packages/ that is published (not private); new packages are picked up. */
function publishedPackages(repoRoot) {
  const base = join(repoRoot, "packages");
  return readdirSync(base)
    .map((name) => join(base, name))
    .filter((dir) => existsSync(join(dir, "package.json")))
    .filter((dir) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).private !== true);
}

/** The API Extractor configuration for the package in `dir`: an api report only, from dist/index.d.ts. */
function reportConfig(dir) {
  const name = dir.split("/").pop();
  return {
    projectFolder: dir,
    mainEntryPointFilePath: "<projectFolder>/dist/index.d.ts",
    compiler: { overrideTsconfig: { compilerOptions: { skipLibCheck: true, types: ["node"] } } },
    apiReport: {
      enabled: true,
      reportFileName: `${name}.api.md`,
      reportFolder: "<projectFolder>/etc/",
      // Where a check leaves the differing report for a look: git-ignored, out of dist/ (which ships).
      reportTempFolder: "<projectFolder>/node_modules/.cache/api-extractor/",
    },
    docModel: { enabled: false },
    dtsRollup: { enabled: false },
    tsdocMetadata: { enabled: false },
    messages: {
      // Doc comments here are prose for readers, not TSDoc markup; the report is about the surface.
      tsdocMessageReporting: { default: { logLevel: "none" } },
      extractorMessageReporting: {
        default: { logLevel: "warning" },
        // ckpt marks no release stages (@public/@beta): everything exported is public.
        "ae-missing-release-tag": { logLevel: "none" },
        // Which names carry a doc comment, and whether its {@link}s resolve, is the reviewers'
        // call (the comments are prose), not this report's.
        "ae-undocumented": { logLevel: "none" },
        "ae-unresolved-link": { logLevel: "none" },
        // A type reachable from the surface but not exported is noted in the report, for review.
        "ae-forgotten-export": { logLevel: "none", addToApiReportFile: true },
      },
    },
  };
}

let failed = 0;
for (const dir of publishedPackages(root)) {
  if (only.length > 0 && !only.includes(dir.split("/").pop())) continue;
  if (update) mkdirSync(join(dir, "etc"), { recursive: true });
  const configObjectFullPath = join(dir, "api-extractor.json"); // notional: the config lives here
  const config = ExtractorConfig.prepare({
    configObject: reportConfig(dir),
    configObjectFullPath,
    packageJsonFullPath: join(dir, "package.json"),
  });
  const result = Extractor.invoke(config, { localBuild: update, showVerboseMessages: false });
  if (!result.succeeded) {
    failed += 1;
    const report = `${dir.slice(root.length + 1)}/etc/${dir.split("/").pop()}.api.md`;
    console.error(
      result.apiReportChanged
        ? `api: the surface of ${dir.slice(root.length + 1)} changed: run \`pnpm api:update\` and commit ${report}`
        : `api: ${dir.slice(root.length + 1)}: ${result.errorCount} error(s), ${result.warningCount} warning(s)`,
    );
  }
}
if (failed > 0) process.exit(1);
console.log(`api: ${update ? "reports written" : "every report matches its built surface"}`);
