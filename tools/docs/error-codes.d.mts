/** Types of error-codes.mjs (a plain ESM tool, also imported by test/docs). */
export declare const ROOT: string;
export declare function sourceUnits(root?: string): Array<{ unit: string; files: string[] }>;
/** code -> the packages/apps that raise it. */
export declare function collectErrorCodes(root?: string): Map<string, Set<string>>;
export declare function documentedCodes(markdown: string): Set<string>;
