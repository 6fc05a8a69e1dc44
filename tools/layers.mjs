// The layer picture of ckpt as data: which workspace package may depend on which.
// docs/architecture.md draws the same picture; tools/check-layers.mjs enforces it.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

/** package name (without @ckpt/) -> the @ckpt packages it may import. Apps may import any package. */
export const ALLOWED_EDGES = {
  errors: [],
  progress: [],
  manifest: ["errors"],
  diagnostics: ["errors", "manifest"],
  "object-store": ["errors", "progress"],
  tensors: ["errors", "manifest"],
  "archive-reader": ["errors", "progress", "manifest", "object-store", "tensors"],
  "archive-publisher": ["errors", "progress", "manifest", "object-store", "tensors", "archive-reader"],
  retention: ["errors", "manifest", "object-store", "archive-reader"],
  merge: ["errors", "progress", "manifest", "tensors", "archive-reader"],
  "hf-conversion": ["errors", "progress", "manifest", "object-store", "tensors", "archive-reader"],
  verify: ["errors", "manifest", "tensors", "hf-conversion"],
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

/**
 * Edges used without a static import (unit name -> packages): the integration tests spawn the apps'
 * built `dist/bin.js` and load the manager in a child through a computed `import()`, so turbo must
 * build them first and the dependency stays declared.
 */
export const RUNTIME_EDGES = {
  "@ckpt/integration-tests": ["@ckpt/cli", "@ckpt/trainer-binding", "@ckpt/trainer-checkpoint-manager"],
};

const IMPORT_RE =
  /(?:^|[^\w.])(?:import|export)\s[^"'`;]*?from\s*["']([^"']+)["']|(?:^|[^\w.])import\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|require\(\s*["']([^"']+)["']\s*\)/g;

/** A one-line string literal whose text is itself an import (a test's fixture source), quotes included. */
const QUOTED_IMPORT_RE =
  /'(?:[^'\\\n]|\\.)*?(?:import|from|require\()\s*["'`](?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*?(?:import|from|require\()\s*(?:\\"|'|`)(?:[^"\\\n]|\\.)*"|`(?:[^`\\\n]|\\.)*?(?:import|from|require\()\s*["'](?:[^`\\\n]|\\.)*`/g;

/** Every module specifier a source text imports (static, dynamic and require), not ones quoted in strings. */
export function importsOf(text) {
  const found = [];
  for (const match of text.replace(QUOTED_IMPORT_RE, '""').matchAll(IMPORT_RE))
    found.push(match[1] ?? match[2] ?? match[3] ?? match[4]);
  return found;
}

/**
 * Pure check of one workspace unit. `unit` = { dir, name, kind, deps, devDeps, sources: [{ file,
 * text, isTest }] }, kind one of "package" (a layer of the picture), "app" (may import any package),
 * "tests" (the integration tests: an app whose every file is a test) or "test-utils" (the shared
 * test helpers, which import no workspace package). Returns a list of problems, empty when sound.
 */
export function checkUnit(unit) {
  const problems = [];
  const short = unit.name.replace(/^@ckpt\//, "");
  const allowed =
    unit.kind === "app" || unit.kind === "tests"
      ? null
      : unit.kind === "test-utils"
        ? []
        : ALLOWED_EDGES[short];
  const testsOnly = unit.kind === "tests";
  if (unit.kind === "package" && allowed === undefined) {
    problems.push(
      `${unit.dir}: package ${unit.name} is not in the layer picture (tools/layers.mjs, docs/architecture.md)`,
    );
    return problems;
  }
  const permits = (target, isTest) =>
    target === short ||
    (TEST_ONLY.has(target)
      ? isTest || testsOnly
      : allowed === null
        ? target in ALLOWED_EDGES || (testsOnly && RUNTIME_EDGES[unit.name]?.includes(`@ckpt/${target}`))
        : allowed.includes(target));
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
          ((source.isTest || testsOnly) && `@ckpt/${target}` in unit.devDeps);
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
  problems.push(...unusedEdges(unit));
  return problems;
}

/** Declared @ckpt/* dependencies that no source file of the unit imports (nor uses at run time, see RUNTIME_EDGES). */
function unusedEdges(unit) {
  const imported = new Set(
    unit.sources.flatMap((source) =>
      importsOf(source.text)
        .filter((spec) => spec.startsWith("@ckpt/"))
        .map((spec) => `@ckpt/${spec.slice(6).split("/")[0]}`),
    ),
  );
  const runs = new Set(RUNTIME_EDGES[unit.name] ?? []);
  const problems = [];
  for (const [field, deps] of [
    ["dependencies", unit.deps],
    ["devDependencies", unit.devDeps],
  ]) {
    for (const dep of Object.keys(deps)) {
      if (dep.startsWith("@ckpt/") && dep !== unit.name && !imported.has(dep) && !runs.has(dep))
        problems.push(
          `${unit.dir}/package.json: ${field} declares ${dep}, which no file of ${unit.name} imports`,
        );
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

/** Reads the workspace unit in `dir` (relative to `root`) for checkUnit. */
function readUnit(root, dir, kind) {
  const pkg = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8"));
  const sources = walk(join(root, dir)).map((file) => {
    const rel = relative(root, file).split(sep).join("/");
    return {
      file: rel,
      text: readFileSync(file, "utf8"),
      isTest: /(\.test\.|\/test\/|\.config\.)/.test(rel),
    };
  });
  return {
    dir,
    name: pkg.name,
    kind,
    deps: pkg.dependencies ?? {},
    devDeps: pkg.devDependencies ?? {},
    sources,
  };
}

/** Reads the workspace at `root` into units for checkUnit: every package and app, the tests, test-utils. */
export function readWorkspace(root) {
  const units = [];
  for (const [folder, kind] of [
    ["packages", "package"],
    ["apps", "app"],
  ]) {
    for (const name of readdirSync(join(root, folder))) {
      if (statSync(join(root, folder, name)).isDirectory())
        units.push(readUnit(root, `${folder}/${name}`, kind));
    }
  }
  units.push(readUnit(root, "test", "tests"), readUnit(root, "tools/test-utils", "test-utils"));
  return units;
}
