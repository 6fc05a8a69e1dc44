import { ObjectStoreError } from "../errors.js";
import type { GetOptions } from "../types.js";

/**
 * The byte window `[start, end)` a ranged get reads from an object of `size` bytes, following the
 * contract on GetOptions.range: an end past the size is clamped, `start === size` is empty, and
 * negative, non-integer or inverted bounds and a start past the size are `STORE_INVALID_RANGE`. Pure.
 */
export function resolveRange(
  key: string,
  range: GetOptions["range"],
  size: number,
): { start: number; end: number } {
  if (range === undefined) return { start: 0, end: size };
  const { start, end } = range;
  const bad = (why: string) =>
    new ObjectStoreError("STORE_INVALID_RANGE", `get ${key}: ${why}.`, { kind: "input", subject: key });
  if (!Number.isSafeInteger(start) || start < 0)
    throw bad(`range start ${start} is not a non-negative integer`);
  if (end !== undefined && (!Number.isSafeInteger(end) || end < start)) {
    throw bad(`range end ${end} is not an integer at or after the start ${start}`);
  }
  if (start > size) throw bad(`range start ${start} is past the object's end (${size} bytes)`);
  return { start, end: Math.min(end ?? size, size) };
}
