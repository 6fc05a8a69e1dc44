import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { collectErrorCodes, documentedCodes, ROOT } from "../../tools/docs/error-codes.mjs";
import { loadBuiltCli } from "../../tools/docs/gen-cli-reference.mjs";

const PAGE = join(ROOT, "docs", "troubleshooting.md");

// Parsing every source takes seconds on a busy machine: once for both tests.
let extracted: Map<string, Set<string>> | undefined;
const codesInSource = () => {
  extracted ??= collectErrorCodes();
  return extracted;
};

describe("docs/troubleshooting.md", () => {
  it("has an entry for every error and problem code in the source, and none for a code that no longer exists", async () => {
    const inSource = new Map(codesInSource());
    const cli = (await loadBuiltCli()) as { verifyProblemCodes: () => Promise<string[]> };
    // verify reports hf-conversion's problems as HF_<CODE>, built at run time from its code list.
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
