#!/usr/bin/env node
// Promises tied to tests (issue 19 §5): every bullet of a `## Guarantees` section in docs/*.md ends
// with the test that would fail without it,
//   - A killed save never moves the pointer. (test: test/manager/crash-manager.test.ts › "title")
// and the test exists: the file (from the repository root) holds a vitest `it(`/`test(` (or
// `.each(...)(`) with exactly that title, or, for a .py file, `def <title>(`.
//   node tools/docs/claims.mjs [--root DIR]
// prints the claims whose test is missing (doc:line, reference, why), then one line
//   claims: N · tests found: N · missing: N
// and exits 1 when any is missing. test/docs/claims.test.ts runs it in CI.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

export const ROOT = join(import.meta.dirname, "..", "..");

const HEADING = "## Guarantees";
/** `(test: <path> › "<title>")` closing a bullet. */
const REFERENCE = /\(test: (\S+) › "(.+)"\)\s*$/;

/**
 * The claims of one page: each bullet of its `## Guarantees` section (to the next `## ` heading),
 * continuation lines joined, with the line it starts on and its reference when it has one. Pure.
 */
export function claimsOf(markdown, doc) {
  const lines = markdown.split("\n");
  const claims = [];
  let inSection = false;
  let inFence = false;
  let current;
  for (const [index, line] of lines.entries()) {
    if (line.startsWith("```")) inFence = !inFence;
    if (inFence) continue;
    if (/^#{1,2} /.test(line)) {
      inSection = line.trim() === HEADING;
      current = undefined;
      continue;
    }
    if (!inSection) continue;
    if (/^[-*] /.test(line)) {
      current = { doc, line: index + 1, text: line.slice(2).trim() };
      claims.push(current);
    } else if (current && /^\s+\S/.test(line)) current.text += ` ${line.trim()}`;
    else current = undefined;
  }
  return claims.map(({ doc: page, line, text }) => {
    const match = REFERENCE.exec(text);
    return { doc: page, line, text, file: match?.[1], title: match?.[2] };
  });
}

/** The test titles a file declares: vitest `it(`/`test(` string titles, or pytest `def test_...`. Pure. */
export function testTitles(source, file) {
  if (file.endsWith(".py"))
    return new Set([...source.matchAll(/^\s*(?:async )?def (test_\w+)\(/gm)].map((m) => m[1]));
  const titles = new Set();
  for (const m of source.matchAll(
    /\b(?:it|test)(?:\.each\([\s\S]*?\))?\(\s*(["'`])((?:(?!\1)[^\\]|\\.)*)\1/g,
  )) {
    titles.add(m[2].replace(/\\(.)/g, "$1"));
  }
  return titles;
}

/** Why a claim's test is not there, or undefined when it is. */
function missingReason(claim, root, titlesByFile) {
  if (!claim.file) return 'no reference: end the item with (test: <path> › "<title>")';
  const path = join(root, claim.file);
  if (!existsSync(path) || !statSync(path).isFile()) return `no file ${claim.file}`;
  let titles = titlesByFile.get(claim.file);
  if (!titles) {
    titles = testTitles(readFileSync(path, "utf8"), claim.file);
    titlesByFile.set(claim.file, titles);
  }
  return titles.has(claim.title) ? undefined : `no test titled "${claim.title}" in ${claim.file}`;
}

/** Every claim of `root`/docs/*.md and which of them have no test. */
export function checkClaims(root = ROOT) {
  const docs = readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort();
  const claims = docs.flatMap((name) =>
    claimsOf(readFileSync(join(root, "docs", name), "utf8"), `docs/${name}`),
  );
  const titlesByFile = new Map();
  const missing = [];
  for (const claim of claims) {
    const reason = missingReason(claim, root, titlesByFile);
    if (reason) missing.push({ ...claim, reason });
  }
  return { claims: claims.length, found: claims.length - missing.length, missing };
}

/** The closing line. Pure. */
export function summaryLine({ claims, found, missing }) {
  return `claims: ${claims} · tests found: ${found} · missing: ${missing.length}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const at = process.argv.indexOf("--root");
  const result = checkClaims(at > 0 ? process.argv[at + 1] : ROOT);
  for (const m of result.missing) console.log(`${m.doc}:${m.line}: ${m.reason}`);
  console.log(summaryLine(result));
  process.exit(result.missing.length > 0 ? 1 : 0);
}
