/** Types of claims.mjs (a plain ESM tool, also imported by test/docs). */
export declare const ROOT: string;
export interface Claim {
  readonly doc: string;
  readonly line: number;
  readonly text: string;
  readonly file?: string;
  readonly title?: string;
}
/** The bullets of a page's `## Guarantees` section, each with its test reference when it has one. */
export declare function claimsOf(markdown: string, doc: string): Claim[];
/** The test titles a file declares (vitest `it(`/`test(`, or pytest `def test_...` for .py). */
export declare function testTitles(source: string, file: string): Set<string>;
export interface ClaimsResult {
  readonly claims: number;
  readonly found: number;
  readonly missing: Array<Claim & { readonly reason: string }>;
}
/** Every claim of `root`/docs/*.md and which of them have no test. */
export declare function checkClaims(root?: string): ClaimsResult;
/** `claims: N · tests found: N · missing: N`. */
export declare function summaryLine(result: ClaimsResult): string;
