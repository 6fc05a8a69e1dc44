/** Types of doc-examples.mjs (a plain ESM tool, also imported by test/docs). */
export declare const ROOT: string;
export declare const BLOCK_TIMEOUT_MS: number;

export interface ExampleBlock {
  readonly page: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly runner: "shell" | "typescript" | "python";
  readonly code: string;
  readonly run: boolean;
  readonly s3: boolean;
  readonly exit: number;
  readonly reason?: string;
  readonly problem?: string;
}

export declare function parseExamples(markdown: string, page: string): ExampleBlock[];
export declare function docPages(root?: string): Array<{ page: string; markdown: string }>;

export interface Sandbox {
  readonly scratch: string;
  readonly env: Record<string, string>;
  run(block: ExampleBlock): Promise<{ code: number; stdout: string; stderr: string }>;
  dispose(): Promise<void>;
}
export declare function prepareSandbox(extraEnv?: Record<string, string>): Promise<Sandbox>;
