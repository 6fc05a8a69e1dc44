import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  collectCodeUses,
  documentedCodes,
  ROOT,
  sourceUnits,
  undeclaredCodes,
  unraisedCodes,
} from "../../tools/docs/error-codes.mjs";
import { loadBuiltCli } from "../../tools/docs/gen-cli-reference.mjs";

const PAGE = join(ROOT, "docs", "troubleshooting.md");

// Parsing every source takes seconds on a busy machine: once for both tests.
let extracted: ReturnType<typeof collectCodeUses> | undefined;
const usesInSource = () => {
  extracted ??= collectCodeUses();
  return extracted;
};
/** code -> the units that declare or raise it. */
const codesInSource = () =>
  new Map(
    [...usesInSource()].map(([code, { declared, raised }]) => [code, new Set([...declared, ...raised])]),
  );
/** The codes a unit declares (its code union or `_CODES` list). */
const declaredBy = (unit: string) =>
  [...usesInSource()].filter(([, { declared }]) => declared.has(unit)).map(([code]) => code);

/** A scratch workspace (an empty `apps/`, the given files) for the extractor to read. */
async function scratchTree(files: Record<string, string>): Promise<string> {
  const root = await testdir("ckpt-error-codes-");
  mkdirSync(join(root, "apps"));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  return root;
}

/** Each package's own page lists its error class's codes too (besides docs/troubleshooting.md). */
const PACKAGE_PAGES: Array<[unit: string, page: string, errorCode: RegExp]> = [
  ["@ckpt/archive-reader", "archive.md", /^READER_/],
  ["@ckpt/archive-publisher", "archive.md", /^(COMMIT|PUBLISH|FULL_UPLOAD)_/],
  ["@ckpt/merge", "merge.md", /^MERGE_/],
];

describe("error codes", () => {
  it("every code a package declares is raised by that package (no dead vocabulary)", () => {
    expect(unraisedCodes(usesInSource()), "declared codes nothing raises: raise them or drop them").toEqual(
      [],
    );
  }, 120_000);

  it.each(PACKAGE_PAGES)(
    "every error code %s declares is on docs/%s",
    (unit, page, errorCode) => {
      const text = readFileSync(join(ROOT, "docs", page), "utf8");
      const codes = declaredBy(unit).filter((code) => errorCode.test(code));
      expect(codes.length).toBeGreaterThan(10);
      expect(codes.filter((code) => !text.includes(`\`${code}\``))).toEqual([]);
    },
    120_000,
  );

  it("every code a package raises is declared by it or by a package it depends on", () => {
    expect(
      undeclaredCodes(usesInSource()),
      "raised codes their owner does not declare: add them to its code union or _CODES list",
    ).toEqual([]);
  }, 120_000);

  it("the dead-vocabulary check fails on a declared code that nothing raises", async () => {
    const root = await scratchTree({
      "packages/widget/package.json": JSON.stringify({ name: "@ckpt/widget" }),
      "packages/widget/src/errors.ts": [
        'import { CkptError } from "@ckpt/errors";',
        'export type WidgetErrorCode = "WIDGET_USED" | "WIDGET_DEAD";',
        'export const WIDGET_PROBLEM_CODES = ["WIDGET_LISTED"] as const;',
        "export class WidgetError extends CkptError<WidgetErrorCode> {}",
      ].join("\n"),
      "packages/widget/src/use.ts": [
        'import { WidgetError } from "./errors.js";',
        'export const fail = () => new WidgetError("WIDGET_USED", "m", { kind: "input" });',
        'export const RAISED = "RAISED_ELSEWHERE";',
      ].join("\n"),
    });
    const uses = collectCodeUses(root);
    expect(uses.get("WIDGET_USED")).toEqual({
      declared: new Set(["@ckpt/widget"]),
      raised: new Set(["@ckpt/widget"]),
    });
    expect(unraisedCodes(uses)).toEqual(["WIDGET_DEAD (@ckpt/widget)", "WIDGET_LISTED (@ckpt/widget)"]);
  });

  it("the undeclared-code check fails on a code raised outside its owner's vocabulary", async () => {
    const problem = (code: string) => `export const problem = () => ({ code: "${code}", message: "m" });`;
    const root = await scratchTree({
      "packages/widget/package.json": JSON.stringify({ name: "@ckpt/widget" }),
      "packages/widget/src/errors.ts": [
        'import { CkptError } from "@ckpt/errors";',
        'export type WidgetErrorCode = "WIDGET_USED";',
        "export class WidgetError extends CkptError {",
        '  constructor(code: string) { super(code, "m", { kind: "failed" }); }',
        "}",
      ].join("\n"),
      "packages/widget/src/use.ts": [
        'import { WidgetError } from "./errors.js";',
        'export const used = () => new WidgetError("WIDGET_USED");',
        'export const stray = () => new WidgetError("WIDGET_STRAY");',
        problem("WIDGET_PROBLEM_STRAY"),
      ].join("\n"),
      // A package that depends on the owner may report its codes; one that does not may not.
      "packages/gadget/package.json": JSON.stringify({
        name: "@ckpt/gadget",
        dependencies: { "@ckpt/widget": "workspace:^" },
      }),
      "packages/gadget/src/problem.ts": problem("WIDGET_USED"),
      "packages/doohickey/package.json": JSON.stringify({ name: "@ckpt/doohickey" }),
      "packages/doohickey/src/problem.ts": problem("WIDGET_USED"),
    });
    const uses = collectCodeUses(root);
    expect(uses.get("WIDGET_USED")?.raised).toEqual(
      new Set(["@ckpt/widget", "@ckpt/gadget", "@ckpt/doohickey"]),
    );
    expect(undeclaredCodes(uses, sourceUnits(root))).toEqual([
      "WIDGET_PROBLEM_STRAY (@ckpt/widget)",
      "WIDGET_STRAY (@ckpt/widget)",
      "WIDGET_USED (@ckpt/doohickey)",
    ]);
  });
});

describe("docs/troubleshooting.md", () => {
  it("has an entry for every error and problem code in the source, and none for a code that no longer exists", async () => {
    const inSource = new Map(codesInSource());
    const cli = (await loadBuiltCli()) as { verifyProblemCodes: () => Promise<string[]> };
    // verify's closed set of problem codes, as the built CLI reports them.
    for (const code of await cli.verifyProblemCodes())
      if (!inSource.has(code)) inSource.set(code, new Set(["@ckpt/cli"]));
    const documented = documentedCodes(readFileSync(PAGE, "utf8"));
    const missing = [...inSource.keys()].filter((c) => !documented.has(c)).sort();
    const stale = [...documented].filter((c) => !inSource.has(c)).sort();
    expect(
      missing.map((c) => `${c} (${[...inSource.get(c)!].join(", ")})`),
      "codes without an entry: add a row to docs/troubleshooting.md (node tools/docs/error-codes.mjs --missing lists them)",
    ).toEqual([]);
    expect(stale, "entries for codes nothing raises any more: remove them").toEqual([]);
  }, 120_000);

  it("the extractor finds codes however they are raised, and only codes", () => {
    const codes = codesInSource();
    // new XError("CODE"), a local helper's `code` parameter, a `code:` property, a union type, a _CODES list.
    for (const code of [
      "RECORD_NOT_FOUND",
      "PICKLE_CALL_REFUSED",
      "DCP_FILE_SHORT",
      "STORE_BAD_URI",
      "COMMIT_NOT_ITER_DIR",
      "CLI_USAGE",
    ]) {
      expect(codes.has(code), code).toBe(true);
    }
    // Values that are not codes: dtype names, enum members, errno names compared against.
    for (const notCode of ["F8_E4M3", "TORCH_CONTIGUOUS_FORMAT", "ENOENT", "EEXIST"])
      expect(codes.has(notCode), notCode).toBe(false);
  }, 120_000);
});
