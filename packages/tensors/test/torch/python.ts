import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { TORCH_PYTHON } from "@ckpt/test-utils";

/** The torch interpreter (test-utils' TORCH_PYTHON). Missing torch fails the test. */
export const PYTHON = TORCH_PYTHON;
export const HELPER = join(import.meta.dirname, "torch_helper.py");

const run = promisify(execFile);

/** Tests that start /usr/bin/python3 + torch (2-5 s each import on a busy shared machine). */
export const PYTHON_TEST_TIMEOUT = 120_000;

/** Runs a Python script and parses the JSON it prints. */
export async function python<T>(script: string, ...args: string[]): Promise<T> {
  const { stdout } = await run(PYTHON, [script, ...args], { maxBuffer: 64 * 1024 * 1024 });
  return JSON.parse(stdout) as T;
}

export interface Digest {
  dtype: string;
  shape: number[];
  sha256: string;
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** A scratch directory removed when the test ends. */
export { testdir as scratch } from "@ckpt/test-utils";
