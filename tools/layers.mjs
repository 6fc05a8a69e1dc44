// The layer picture of ckpt as data: which workspace package may depend on which.
// docs/architecture.md draws the same picture; tools/check-layers.mjs enforces it.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

/** package name (without @ckpt/) -> the @ckpt packages it may import. Apps may import any package. */
export const ALLOWED_EDGES = {
  errors: [],
  manifest: ["errors"],
  diagnostics: ["errors", "manifest"],
  "object-store": ["errors"],
  tensors: ["errors", "manifest"],
  "archive-reader": ["errors", "manifest", "object-store", "tensors"],
  "archive-publisher": ["errors", "manifest", "object-store", "tensors", "archive-reader"],
  retention: ["errors", "manifest", "object-store", "archive-reader"],
  merge: ["errors", "manifest", "tensors", "archive-reader"],
  "hf-conversion": ["errors", "manifest", "object-store", "tensors", "archive-reader"],
  "trainer-checkpoint-manager": [
    "errors",
    "manifest",
    "object-store",
    "tensors",
    "archive-reader",
    "archive-publisher",
    "retention",
  ],
};

/** Private helpers every package may use in tests only (devDependencies). */
const TEST_ONLY = new Set(["test-utils"]);

const IMPORT_RE =
  /(?:^|[^\w.])(?:import|export)\s[^"'`;]*?from\s*["']([^"']+)["']|(?:^|[^\w.])import\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|require\(\s*["']([^"']+)["']\s*\)/g;

/** Every module specifier a source text imports (static, dynamic and require). */
export function importsOf(text) {
  const found = [];
  for (const match of text.matchAll(IMPORT_RE)) found.push(match[1] ?? match[2] ?? match[3] ?? match[4]);
  return found;
}

/**
 * Pure check of one workspace unit. `unit` = { dir, name, kind: "package"|"app", deps, devDeps,
 * sources: [{ file, text, isTest }] }. Returns a list of problems (strings), empty when sound.
 */
export function checkUnit(unit) {
  const problems = [];
  const short = unit.name.replace(/^@ckpt\//, "");
  const allowed = unit.kind === "app" ? null : ALLOWED_EDGES[short];
  if (unit.kind === "package" && allowed === undefined) {
    problems.push(
      `${unit.dir}: package ${unit.name} is not in the layer picture (tools/layers.mjs, docs/architecture.md)`,
    );
    return problems;
  }
  const permits = (target, isTest) =>
    target === short ||
    (TEST_ONLY.has(target) ? isTest : allowed === null ? target in ALLOWED_EDGES : allowed.includes(target));
  for (const [dep, range] of Object.entries(unit.deps)) {
    if (!dep.startsWith("@ckpt/")) continue;
    const target = dep.slice(6);
    if (!String(range).startsWith("workspace:"))
      problems.push(`${unit.dir}/package.json: ${dep} must use the workspace: protocol, not ${range}`);
    if (!permits(target, false))
      problems.push(`${unit.dir}/package.json: ${unit.name} may not depend on ${dep} (layer picture)`);
  }
  for (const [dep, range] of Object.entries(unit.devDeps)) {
    if (dep.startsWith("@ckpt/") && !String(range).startsWith("workspace:")) {
      problems.push(`${unit.dir}/package.json: ${dep} must use the workspace: protocol, not ${range}`);
    }
  }
  for (const source of unit.sources) {
    for (const spec of importsOf(source.text)) {
      if (spec.startsWith("@ckpt/")) {
        const target = spec.slice(6).split("/")[0];
        if (spec.slice(6).includes("/"))
          problems.push(
            `${source.file}: imports ${spec}; import only a package's public entry (@ckpt/${target})`,
          );
        if (!permits(target, source.isTest))
          problems.push(`${source.file}: ${unit.name} may not import ${spec} (layer picture)`);
        const declared =
          target === short ||
          `@ckpt/${target}` in unit.deps ||
          (source.isTest && `@ckpt/${target}` in unit.devDeps);
        if (!declared) {
          problems.push(`${source.file}: imports ${spec} without declaring it in ${unit.dir}/package.json`);
        }
      } else if (/(^|\/)(packages|apps)\/[^/]+\/(src|dist)\b/.test(spec) || /\/dist(\/|$)/.test(spec)) {
        problems.push(
          `${source.file}: reaches into another package's files (${spec}); import its public entry instead`,
        );
      }
    }
  }
  return problems;
}

function walk(dir, out = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name === "dist" || entry.name.startsWith(".")) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (/\.(c|m)?[jt]s$/.test(entry.name)) out.push(path);
  }
  return out;
}

/** Reads the workspace at `root` into units for checkUnit. */
export function readWorkspace(root) {
  const units = [];
  for (const [folder, kind] of [
    ["packages", "package"],
    ["apps", "app"],
  ]) {
    const base = join(root, folder);
    for (const name of readdirSync(base)) {
      const dir = join(base, name);
      if (!statSync(dir).isDirectory()) continue;
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      const sources = walk(dir).map((file) => {
        const rel = relative(root, file).split(sep).join("/");
        return {
          file: rel,
          text: readFileSync(file, "utf8"),
          isTest: /(\.test\.|\/test\/|\.config\.)/.test(rel),
        };
      });
      units.push({
        dir: `${folder}/${name}`,
        name: pkg.name,
        kind,
        deps: pkg.dependencies ?? {},
        devDeps: pkg.devDependencies ?? {},
        sources,
      });
    }
  }
  return units;
}
