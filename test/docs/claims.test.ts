import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { checkClaims, claimsOf, ROOT, summaryLine, testTitles } from "../../tools/docs/claims.mjs";

const run = promisify(execFile);
const CHECKER = join(ROOT, "tools", "docs", "claims.mjs");

/** A scratch repository (docs/ and the given files) for the checker to read. */
async function scratchTree(files: Record<string, string>): Promise<string> {
  const root = await testdir("ckpt-claims-");
  mkdirSync(join(root, "docs"));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  return root;
}

/** Runs the checker as CI does; a non-zero exit is returned, not thrown. */
async function checker(root: string): Promise<{ code: number; lines: string[] }> {
  const done = await run(process.execPath, [CHECKER, "--root", root]).then(
    ({ stdout }) => ({ code: 0, stdout }),
    (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
  );
  return { code: done.code, lines: done.stdout.trimEnd().split("\n") };
}

const SPEC = [
  'import { it, test } from "vitest";',
  'it("keeps the pointer", () => {});',
  "test.each([1, 2])('case %s holds', () => {});",
  'it("says \\"no\\"", () => {});',
].join("\n");

const PAGE = [
  "# A page",
  "",
  "## Guarantees",
  "",
  '- The pointer stays. (test: t/a.test.ts › "keeps the pointer")',
  "- A claim over two",
  '  lines. (test: t/a.test.ts › "case %s holds")',
  '- Python too. (test: t/test_x.py › "test_resume")',
  '- A test nobody wrote. (test: t/a.test.ts › "never written")',
  '- A file nobody wrote. (test: t/gone.test.ts › "keeps the pointer")',
  "- A promise with no test at all.",
  "",
  "## After",
  "",
  '- Not a claim. (test: t/a.test.ts › "never written")',
].join("\n");

describe("pnpm test-claims (tools/docs/claims.mjs)", () => {
  it("every Guarantees item of docs/ names a test that exists", async () => {
    const { code, lines } = await checker(ROOT);
    console.log(lines.at(-1));
    expect(lines.slice(0, -1), "claims without their test (doc:line: why)").toEqual([]);
    expect(lines.at(-1)).toMatch(/^claims: (\d+) · tests found: \1 · missing: 0$/);
    expect(code).toBe(0);
    expect(checkClaims().claims).toBeGreaterThanOrEqual(20);
  });

  it("reads each bullet of a Guarantees section with its reference, and nothing outside it", () => {
    const claims = claimsOf(PAGE, "docs/a.md");
    expect(claims.map((c) => [c.line, c.file, c.title])).toEqual([
      [5, "t/a.test.ts", "keeps the pointer"],
      [6, "t/a.test.ts", "case %s holds"],
      [8, "t/test_x.py", "test_resume"],
      [9, "t/a.test.ts", "never written"],
      [10, "t/gone.test.ts", "keeps the pointer"],
      [11, undefined, undefined],
    ]);
  });

  it("finds vitest titles (it, test, .each, escaped quotes) and pytest functions", () => {
    expect([...testTitles(SPEC, "a.test.ts")]).toEqual(["keeps the pointer", "case %s holds", 'says "no"']);
    expect([...testTitles("def test_resume(tmp):\n    pass\ndef helper():\n", "test_x.py")]).toEqual([
      "test_resume",
    ]);
  });

  it("reports a missing test, file or reference by doc:line, finds present ones, exits 1", async () => {
    const root = await scratchTree({
      "docs/a.md": PAGE,
      "t/a.test.ts": SPEC,
      "t/test_x.py": "def test_resume():\n    assert True\n",
    });
    const result = checkClaims(root);
    expect(summaryLine(result)).toBe("claims: 6 · tests found: 3 · missing: 3");
    expect(await checker(root)).toEqual({
      code: 1,
      lines: [
        'docs/a.md:9: no test titled "never written" in t/a.test.ts',
        "docs/a.md:10: no file t/gone.test.ts",
        'docs/a.md:11: no reference: end the item with (test: <path> › "<title>")',
        "claims: 6 · tests found: 3 · missing: 3",
      ],
    });
  });

  it("passes a tree whose every claim has its test, with the one summary line", async () => {
    const root = await scratchTree({
      "docs/a.md": '## Guarantees\n\n- Kept. (test: t/a.test.ts › "keeps the pointer")\n',
      "t/a.test.ts": SPEC,
    });
    expect(await checker(root)).toEqual({ code: 0, lines: ["claims: 1 · tests found: 1 · missing: 0"] });
  });
});
