/** Types of error-codes.mjs (a plain ESM tool, also imported by test/docs). */
export declare const ROOT: string;
/** Each package's and app's src/ files and the workspace packages it depends on. */
export declare function sourceUnits(
  root?: string,
): Array<{ unit: string; files: string[]; dependsOn: string[] }>;
/** code -> the packages/apps that declare it (a code union, a _CODES list) and those that raise it. */
export declare function collectCodeUses(
  root?: string,
): Map<string, { declared: Set<string>; raised: Set<string> }>;
/** "CODE (@ckpt/x)" for each code a unit declares and does not raise. */
export declare function unraisedCodes(
  uses: Map<string, { declared: Set<string>; raised: Set<string> }>,
): string[];
/** "CODE (@ckpt/x)" for each code a unit raises that neither it nor a package it depends on declares. */
export declare function undeclaredCodes(
  uses: Map<string, { declared: Set<string>; raised: Set<string> }>,
  units?: Array<{ unit: string; dependsOn: string[] }>,
): string[];
/** code -> the packages/apps that declare or raise it. */
export declare function collectErrorCodes(root?: string): Map<string, Set<string>>;
export declare function documentedCodes(markdown: string): Set<string>;
/** code -> the `##` section, meaning and remedy of its docs/troubleshooting.md row. */
export declare function troubleshootingEntries(
  markdown: string,
): Record<string, { section: string; meaning: string; remedy: string }>;
