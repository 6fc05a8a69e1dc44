// Every error and problem code ckpt can show a user, found in the source with the TypeScript
// compiler's parser and binder (no type checking, so it takes seconds) (docs/troubleshooting.md must have an entry for each):
//   node tools/docs/error-codes.mjs            list the codes, one per line, with where they come from
//   node tools/docs/error-codes.mjs --missing  list the codes docs/troubleshooting.md has no entry for
//   node tools/docs/error-codes.mjs --undeclared  list the codes raised where no owner declares them
//
// A string literal counts as a code when it is UPPER_SNAKE (or one upper-case word) and
//   - is passed where a parameter named `code` (or typed `...Code`) is expected
//     (`new ManifestError("RECORD_NOT_FOUND", ...)`, `fail("PICKLE_INVALID", ...)`),
//   - is the value of a `code` property (`{ code: "DCP_FILE_SHORT", ... }`, `readonly code = "CLI_USAGE"`),
//     of a `code` variable (`code = "RECORD_UNKNOWN_FIELD"`) or of a `..._CODE_...` table,
//   - is an element of a `..._CODES` constant, or a member of a `...Code` union type (these two
//     declare a code; every other use raises it),
//   - is in a row of a table whose declared type names a `...Code` (`Array<[Status, PruneKeepCode]>`).
// A conditional (`a ? "X" : "Y"`) passes both branches on.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CODE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;
/** POSIX errno names (EEXIST, EISDIR) given to synthetic Node-style errors: the platform's, not ckpt's. */
const ERRNO = /^E[A-Z]+$/;

function sources(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (path.endsWith(".ts") && !path.endsWith(".test.ts") && !path.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/**
 * The `src/` of every package and app, as units: { unit: "@ckpt/x", files, dependsOn: the
 * workspace packages it depends on }.
 */
export function sourceUnits(root = ROOT) {
  const units = [];
  for (const folder of ["packages", "apps"]) {
    for (const name of readdirSync(join(root, folder)).sort()) {
      const src = join(root, folder, name, "src");
      let pkg;
      try {
        pkg = JSON.parse(readFileSync(join(root, folder, name, "package.json"), "utf8"));
        statSync(src);
      } catch {
        continue;
      }
      const dependsOn = Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies }).filter((d) =>
        d.startsWith("@ckpt/"),
      );
      units.push({ unit: pkg.name, files: sources(src), dependsOn });
    }
  }
  return units;
}

const isCodeLike = (name) => name === "code" || /Code$/.test(name);

/** Walks up through parentheses, `as`, `satisfies` and conditional branches to where a value is used. */
function usage(node) {
  let at = node;
  while (
    ts.isParenthesizedExpression(at.parent) ||
    ts.isAsExpression(at.parent) ||
    ts.isSatisfiesExpression(at.parent) ||
    (ts.isConditionalExpression(at.parent) && at.parent.condition !== at)
  ) {
    at = at.parent;
  }
  return at;
}

/** The bases error classes extend (@ckpt/errors): their constructors take the code first. */
const BASE_CLASSES = new Set(["CkptError", "CkptSubjectError"]);
const BASE_CLASS = "CkptError";

/**
 * The constructor a class's instances are built by: its own, else its base class's (followed
 * through the program). A class extending a base of @ckpt/errors with no constructor of its own answers
 * `BASE_CLASS`, since the base is outside the parsed sources.
 */
function constructorOf(checker, classDecl) {
  for (let at = classDecl, depth = 0; at !== undefined && depth < 8; depth++) {
    const own = at.members.find((m) => ts.isConstructorDeclaration(m));
    if (own) return own;
    const base = at.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0]
      ?.expression;
    if (base === undefined) return undefined;
    if (BASE_CLASSES.has(base.getText())) return BASE_CLASS;
    let symbol = checker.getSymbolAtLocation(base);
    if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
    at = symbol?.declarations?.find((d) => ts.isClassDeclaration(d));
  }
  return undefined;
}

/** The function-like declaration a callee names (following imports and base classes), or undefined. */
function calleeDeclaration(checker, call) {
  if (ts.isCallExpression(call) && call.expression.kind === ts.SyntaxKind.SuperKeyword) {
    let cls = call.parent;
    while (cls && !ts.isClassLike(cls)) cls = cls.parent;
    const base = cls?.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0]
      ?.expression;
    if (base === undefined) return undefined;
    if (BASE_CLASSES.has(base.getText())) return BASE_CLASS;
    let symbol = checker.getSymbolAtLocation(base);
    if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
    const decl = symbol?.declarations?.find((d) => ts.isClassDeclaration(d));
    return decl && constructorOf(checker, decl);
  }
  let symbol = checker.getSymbolAtLocation(
    ts.isNewExpression(call) || ts.isCallExpression(call) ? call.expression : call,
  );
  if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
  for (const decl of symbol?.declarations ?? []) {
    if (ts.isClassDeclaration(decl)) return constructorOf(checker, decl);
    if (ts.isFunctionLike(decl)) return decl;
    if (ts.isVariableDeclaration(decl) && decl.initializer && ts.isFunctionLike(decl.initializer))
      return decl.initializer;
  }
  // A callee held by a parameter or variable of a function type (`fail: Refuse`): its signature.
  if (ts.isCallExpression(call))
    return checker.getTypeAtLocation(call.expression).getCallSignatures()[0]?.getDeclaration();
  return undefined;
}

/** Does the parameter this argument binds to hold a code (named `code`, or typed `...Code`)? */
function bindsCode(checker, call, argument) {
  const index = call.arguments?.indexOf(argument) ?? -1;
  const callee = calleeDeclaration(checker, call);
  if (callee === BASE_CLASS) return index === 0;
  const param = callee?.parameters[index];
  if (!param) return false;
  return isCodeLike(param.name.getText()) || /Code\b/.test(param.type?.getText() ?? "");
}

/** How this string literal is used: "raised" (passed, assigned, tabled as a code), "declared" (a member of a `...Code` union or a `..._CODES` list) or false (not a code). */
function codeUse(checker, literal) {
  const at = usage(literal);
  const parent = at.parent;
  if ((ts.isCallExpression(parent) || ts.isNewExpression(parent)) && parent.arguments?.includes(at)) {
    return bindsCode(checker, parent, at) && "raised";
  }
  if ((ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.initializer === at) {
    // `code: "X"`, or a command's `abortCode: "UI_STOPPED"`, which the CLI raises on a signal.
    if (isCodeLike(parent.name.getText())) return "raised";
    // A value of a code table: `const JSON_CODE_MAP = { JSON_TOO_DEEP: "SAFETENSORS_HEADER_TOO_DEEP" }`.
    const table = usage(parent.parent).parent;
    return (
      ts.isObjectLiteralExpression(parent.parent) &&
      ts.isVariableDeclaration(table) &&
      /(^|_)CODES?(_|$)/.test(table.name.getText()) &&
      "raised"
    );
  }
  if (ts.isVariableDeclaration(parent) && parent.initializer === at)
    return isCodeLike(parent.name.getText()) && "raised";
  if (
    ts.isBinaryExpression(parent) &&
    parent.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
    parent.right === at
  ) {
    return isCodeLike(parent.left.getText().split(".").at(-1)) && "raised";
  }
  if (ts.isArrayLiteralExpression(parent)) {
    const holder = usage(parent).parent;
    if (ts.isVariableDeclaration(holder) && /_CODES$/.test(holder.name.getText())) return "declared";
    // A row of a table typed with a code: `const ORDER: Array<[Status, PruneKeepCode, string]> = [[...]]`.
    let table = parent;
    while (ts.isArrayLiteralExpression(usage(table).parent)) table = usage(table).parent;
    const declaration = usage(table).parent;
    return (
      table !== parent &&
      ts.isVariableDeclaration(declaration) &&
      /Code\b/.test(declaration.type?.getText() ?? "") &&
      "raised"
    );
  }
  if (ts.isLiteralTypeNode(parent)) {
    let up = parent.parent;
    while (ts.isUnionTypeNode(up) || ts.isParenthesizedTypeNode(up)) up = up.parent;
    return ts.isTypeAliasDeclaration(up) && /Code$/.test(up.name.text) && "declared";
  }
  return false;
}

/**
 * Every code in the source with the units (packages/apps) that declare it (a `...Code` union, a
 * `..._CODES` list) and those that raise it (every other use): Map code -> { declared: Set of
 * "@ckpt/x", raised: Set of "@ckpt/x" }.
 */
export function collectCodeUses(root = ROOT) {
  const units = sourceUnits(root);
  const unitOf = new Map(units.flatMap(({ unit, files }) => files.map((f) => [f, unit])));
  const program = ts.createProgram([...unitOf.keys()], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: [],
    // Only the listed sources: codes are raised by a package's own helpers, and library types (zod, the
    // AWS SDK) would cost most of the time.
    noResolve: true,
    noLib: true,
  });
  const checker = program.getTypeChecker();
  const codes = new Map();
  for (const file of program.getSourceFiles()) {
    const unit = unitOf.get(file.fileName);
    if (unit === undefined) continue;
    const visit = (node) => {
      if (
        (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) &&
        CODE.test(node.text) &&
        !ERRNO.test(node.text)
      ) {
        const use = codeUse(checker, node);
        if (use) {
          if (!codes.has(node.text)) codes.set(node.text, { declared: new Set(), raised: new Set() });
          codes.get(node.text)[use].add(unit);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  return codes;
}

/** Every code in the source, with the units that declare or raise it: Map code -> Set of "@ckpt/x". */
export function collectErrorCodes(root = ROOT) {
  const codes = new Map();
  for (const [code, { declared, raised }] of collectCodeUses(root))
    codes.set(code, new Set([...declared, ...raised]));
  return codes;
}

/** Codes a unit declares but never raises itself (dead vocabulary), as "CODE (@ckpt/x)" lines. */
export function unraisedCodes(uses) {
  const dead = [];
  for (const [code, { declared, raised }] of uses) {
    for (const unit of declared) if (!raised.has(unit)) dead.push(`${code} (${unit})`);
  }
  return dead.sort();
}

/**
 * Codes a unit raises that neither it nor a package it depends on declares (a code union or a
 * `..._CODES` list: the owner's vocabulary), as "CODE (@ckpt/x)" lines. A code passed to an error
 * class typed with a plain `string`, or reported as a problem code, lands here when its owner's
 * vocabulary misses it.
 */
export function undeclaredCodes(uses, units = sourceUnits()) {
  const owners = new Map(units.map(({ unit, dependsOn }) => [unit, new Set([unit, ...dependsOn])]));
  const stray = [];
  for (const [code, { declared, raised }] of uses) {
    for (const unit of raised) {
      if (![...(owners.get(unit) ?? [unit])].some((owner) => declared.has(owner)))
        stray.push(`${code} (${unit})`);
    }
  }
  return stray.sort();
}

const BACKTICKED_CODE = /`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)`/g;

/** The codes docs/troubleshooting.md has an entry for: backticked codes in a table row's first cell or a heading. */
export function documentedCodes(markdown) {
  const found = new Set();
  for (const line of markdown.split("\n")) {
    const key = line.startsWith("|") ? line.split("|")[1] : line.startsWith("#") ? line : undefined;
    if (key === undefined) continue;
    for (const match of key.matchAll(BACKTICKED_CODE)) found.add(match[1]);
  }
  return found;
}

/**
 * The table rows of docs/troubleshooting.md as code -> { section, meaning, remedy }: each code
 * in a row's first cell gets the row's second ("what it means") and third ("what to do") cells
 * and the `##` heading above it. This page is ckpt's registry of codes and their remedies.
 */
export function troubleshootingEntries(markdown) {
  const entries = {};
  let section = "";
  for (const line of markdown.split("\n")) {
    if (line.startsWith("## ")) section = line.slice(3).trim();
    if (!line.startsWith("|")) continue;
    const cells = line
      .split("|")
      .slice(1, -1)
      .map((cell) => cell.trim());
    if (cells.length < 3) continue;
    for (const match of cells[0].matchAll(BACKTICKED_CODE)) {
      entries[match[1]] = { section, meaning: cells[1], remedy: cells[2] };
    }
  }
  return entries;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const codes = collectErrorCodes();
  if (process.argv.includes("--undeclared")) {
    for (const line of undeclaredCodes(collectCodeUses())) console.log(line);
  } else if (process.argv.includes("--missing")) {
    const documented = documentedCodes(readFileSync(join(ROOT, "docs", "troubleshooting.md"), "utf8"));
    for (const [code, from] of [...codes].sort()) {
      if (!documented.has(code)) console.log(`${code}\t${[...from].join(", ")}`);
    }
  } else {
    for (const [code, from] of [...codes].sort()) console.log(`${code}\t${[...from].join(", ")}`);
  }
  console.error(`${codes.size} codes in ${relative(process.cwd(), ROOT) || "."}`);
}
