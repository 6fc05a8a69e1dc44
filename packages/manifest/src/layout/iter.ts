import { truncateForMessage } from "@ckpt/errors";
import { ManifestError } from "../errors.js";

const ITER_DIR_PREFIX = "iter_";
/** Digits written in a new iteration directory name (`iter_000000100`). */
const ITER_DIR_DIGITS = 9;
/** Most digits parsed: 16 covers every safe integer; more cannot name an exact iteration. */
const MAX_ITER_DIGITS = 16;
const ITER_DIR_PATTERN = new RegExp(`^${ITER_DIR_PREFIX}([0-9]{1,${MAX_ITER_DIGITS}})$`);

/** `iter_` plus the iteration zero-padded to 9 digits (more digits when the number needs them). */
export function formatIterDir(iteration: number): string {
  if (!Number.isSafeInteger(iteration) || iteration < 0) {
    throw new ManifestError(
      "LAYOUT_BAD_ITERATION",
      `format iteration directory: ${iteration} is not a non-negative integer. Iterations count from 0.`,
      { kind: "input" },
    );
  }
  return `${ITER_DIR_PREFIX}${String(iteration).padStart(ITER_DIR_DIGITS, "0")}`;
}

/**
 * The iteration an `iter_<digits>` name stands for, or undefined for any other name. Any digit
 * count is accepted (`iter_000300` from older layouts) as long as the number is exact. Pure.
 */
export function parseIterDir(name: string): number | undefined {
  const match = ITER_DIR_PATTERN.exec(name);
  if (!match) return undefined;
  const value = Number(match[1]);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** Like {@link parseIterDir}, but throws `LAYOUT_BAD_ITER_DIR` naming `context`. */
export function requireIterDir(name: string, context: string): number {
  const value = parseIterDir(name);
  if (value === undefined) {
    throw new ManifestError(
      "LAYOUT_BAD_ITER_DIR",
      `parse iteration directory ${truncateForMessage(name)} in ${context}: it is not iter_<digits>. ` +
        "Iteration directories are named like iter_000000100.",
      { kind: "input", file: context },
    );
  }
  return value;
}
