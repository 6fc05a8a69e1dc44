import { truncateForMessage } from "@ckpt/errors";
import { ManifestError } from "../errors.js";

/** A run-attempt timestamp: `YYYYmmddHHMMSS` in UTC, e.g. `20260901120000`. */
export type RunTs = string;

const RUN_TS_PATTERN = /^([0-9]{4})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})$/;

/** Formats a Date as a run-attempt timestamp (UTC, so every host mints the same name). Pure. */
export function formatRunTs(date: Date): RunTs {
  const time = date.getTime();
  if (!Number.isFinite(time)) {
    throw new ManifestError("LAYOUT_BAD_RUN_TS", "mint run timestamp: the clock returned an invalid date.", {
      kind: "input",
    });
  }
  const year = date.getUTCFullYear();
  if (year < 1000 || year > 9999) {
    throw new ManifestError(
      "LAYOUT_BAD_RUN_TS",
      `mint run timestamp: year ${year} does not have four digits.`,
      { kind: "input" },
    );
  }
  const two = (n: number) => String(n).padStart(2, "0");
  return (
    String(year) +
    two(date.getUTCMonth() + 1) +
    two(date.getUTCDate()) +
    two(date.getUTCHours()) +
    two(date.getUTCMinutes()) +
    two(date.getUTCSeconds())
  );
}

/** Mints the timestamp of a new run attempt from an injected clock (`() => new Date()` in production). */
export function mintRunTs(clock: () => Date): RunTs {
  return formatRunTs(clock());
}

/** The instant a run-attempt timestamp names, or undefined if it is not a real `YYYYmmddHHMMSS` time. Pure. */
export function parseRunTs(text: string): Date | undefined {
  const m = RUN_TS_PATTERN.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const date = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  // Date.UTC rolls 31 February into March; a round trip catches every out-of-range field.
  return formatRunTs(date) === text ? date : undefined;
}

export function isRunTs(text: string): boolean {
  return parseRunTs(text) !== undefined;
}

/** Throws `LAYOUT_BAD_RUN_TS` unless `text` is a valid run-attempt timestamp. */
export function assertRunTs(text: string, context: string): void {
  if (!isRunTs(text)) {
    throw new ManifestError(
      "LAYOUT_BAD_RUN_TS",
      `check run timestamp ${truncateForMessage(text)} in ${context}: it is not a valid YYYYmmddHHMMSS time. ` +
        "Run attempts are named like 20260901120000.",
      { kind: "input", file: context },
    );
  }
}
