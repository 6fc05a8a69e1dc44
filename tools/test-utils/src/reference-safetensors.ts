import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { torch2Python } from "./python.js";

/** tools/fixtures/reference_safetensors.py: the safetensors 0.8 library as a judge, writer and reader. */
export const REFERENCE_SAFETENSORS = join(
  import.meta.dirname,
  "..",
  "..",
  "fixtures",
  "reference_safetensors.py",
);

/** A tensor as the reference library sees it: safetensors dtype name, shape, sha256 of its raw bytes. */
export interface ReferenceTensor {
  dtype?: string;
  shape?: number[];
  sha256?: string;
  /** Set instead when this way of reading has no dtype for the tensor. */
  error?: string;
}

/** One way of reading a file with the reference library. */
export interface ReferenceReading {
  metadata?: Record<string, string> | null;
  tensors?: Record<string, ReferenceTensor>;
  error?: string;
}

/** Runs a command of reference_safetensors.py (judge, write, read) under torch2Python() and parses its JSON. */
export async function referenceSafetensors<T>(
  command: "judge" | "write" | "read",
  ...args: string[]
): Promise<T> {
  const { stdout } = await promisify(execFile)(torch2Python(), [REFERENCE_SAFETENSORS, command, ...args], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(stdout) as T;
}
