// The layer picture of ckpt as data: which workspace package may depend on which.
// docs/architecture.md draws the same picture; tools/check-layers.mjs enforces it.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

/** package name (without @ckpt/) -> the @ckpt packages it may import. Apps may import any package. */
export const ALLOWED_EDGES = {
  errors: [],
  progress: [],
  "command-line": ["errors"],
  manifest: ["errors"],
  diagnostics: ["errors", "manifest"],
  "object-store": ["errors", "progress"],
  tensors: ["errors", "manifest"],
  "archive-reader": ["errors", "progress", "manifest", "object-store", "tensors"],
  "archive-publisher": ["errors", "progress", "manifest", "object-store", "archive-reader"],
  retention: ["errors", "manifest", "object-store", "archive-reader"],
  merge: ["errors", "progress", "manifest", "tensors"],
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
    "verify",
  ],
  evidence: ["errors", "manifest", "diagnostics", "verify", "trainer-checkpoint-manager"],
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

/**
 * The picture against the workspace, edge for edge: every allowed edge is a dependency its package
 * declares (an allowed edge nobody uses makes the picture claim more than is there), and the table
 * in docs/architecture.md lists exactly ALLOWED_EDGES. `units` as from readWorkspace; `doc` the
 * text of docs/architecture.md.
 */
export function pictureProblems(units, doc) {
  const problems = [];
  for (const [name, targets] of Object.entries(ALLOWED_EDGES)) {
    const unit = units.find((u) => u.kind === "package" && u.name === `@ckpt/${name}`);
    if (unit === undefined) {
      problems.push(`tools/layers.mjs: ALLOWED_EDGES names ${name}, which is no package under packages/`);
      continue;
    }
    for (const target of targets)
      if (!(`@ckpt/${target}` in unit.deps))
        problems.push(
          `tools/layers.mjs: the picture allows ${name} -> ${target}, which ${unit.dir}/package.json does not declare; remove the edge here and in docs/architecture.md`,
        );
  }
  const table = new Map();
  const start = doc.indexOf("| package | may depend on |");
  const section = start < 0 ? "" : doc.slice(start).split(/\n\s*\n/)[0];
  if (start < 0) problems.push("docs/architecture.md: no edge table (| package | may depend on |)");
  for (const match of section.matchAll(/^\| `([a-z-]+)` \| (.+?) \|$/gm)) {
    const targets = match[2] === "—" ? [] : [...match[2].matchAll(/`([a-z-]+)`/g)].map((m) => m[1]);
    table.set(match[1], targets);
  }
  for (const [name, targets] of Object.entries(ALLOWED_EDGES)) {
    const listed = table.get(name);
    if (listed === undefined) problems.push(`docs/architecture.md: the edge table has no row for ${name}`);
    else if ([...listed].sort().join() !== [...targets].sort().join())
      problems.push(
        `docs/architecture.md: the row for ${name} lists ${listed.join(", ") || "nothing"}; tools/layers.mjs allows ${targets.join(", ") || "nothing"}`,
      );
  }
  for (const name of table.keys())
    if (!(name in ALLOWED_EDGES))
      problems.push(`docs/architecture.md: the edge table lists ${name}, which tools/layers.mjs does not`);
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
  // The integration tests also run the code examples of docs/*.md (test/docs/examples.test.ts),
  // which resolve their imports from test/: each page counts as one of its sources.
  const tests = readUnit(root, "test", "tests");
  for (const name of readdirSync(join(root, "docs")).filter((n) => n.endsWith(".md")))
    tests.sources.push({
      file: `docs/${name}`,
      text: readFileSync(join(root, "docs", name), "utf8"),
      isTest: true,
    });
  units.push(tests, readUnit(root, "tools/test-utils", "test-utils"));
  return units;
}
