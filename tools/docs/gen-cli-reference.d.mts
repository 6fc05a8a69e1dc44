/** Types of gen-cli-reference.mjs (a plain ESM tool, also imported by test/docs). */
export declare const CLI_REFERENCE: string;
export declare const REMEDY: string;
export interface RecordedBuilder {
  positionals: Array<Record<string, unknown> & { name: string }>;
  options: Array<Record<string, unknown> & { name: string }>;
  examples: Array<{ command: string; description: string }>;
}
export declare function recordBuilder(builder: (yargs: never) => unknown): RecordedBuilder;
export declare function renderCliReference(cli: unknown): Promise<string>;
export declare function loadBuiltCli(): Promise<unknown>;
