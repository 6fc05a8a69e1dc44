import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { collectCodeUses, documentedCodes, ROOT, unraisedCodes } from "../../tools/docs/error-codes.mjs";
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

  it("the dead-vocabulary check fails on a declared code that nothing raises", () => {
    const root = mkdtempSync(join(tmpdir(), "ckpt-error-codes-"));
    try {
      const write = (rel: string, text: string) => {
        mkdirSync(dirname(join(root, rel)), { recursive: true });
        writeFileSync(join(root, rel), text);
      };
      mkdirSync(join(root, "apps"));
      write("packages/widget/package.json", JSON.stringify({ name: "@ckpt/widget" }));
      write(
        "packages/widget/src/errors.ts",
        [
          'import { CkptError } from "@ckpt/errors";',
          'export type WidgetErrorCode = "WIDGET_USED" | "WIDGET_DEAD";',
          'export const WIDGET_PROBLEM_CODES = ["WIDGET_LISTED"] as const;',
          "export class WidgetError extends CkptError<WidgetErrorCode> {}",
        ].join("\n"),
      );
      write(
        "packages/widget/src/use.ts",
        [
          'import { WidgetError } from "./errors.js";',
          'export const fail = () => new WidgetError("WIDGET_USED", "m", { kind: "input" });',
          'export const RAISED = "RAISED_ELSEWHERE";',
        ].join("\n"),
      );
      const uses = collectCodeUses(root);
      expect(uses.get("WIDGET_USED")).toEqual({
        declared: new Set(["@ckpt/widget"]),
        raised: new Set(["@ckpt/widget"]),
      });
      expect(unraisedCodes(uses)).toEqual(["WIDGET_DEAD (@ckpt/widget)", "WIDGET_LISTED (@ckpt/widget)"]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
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
