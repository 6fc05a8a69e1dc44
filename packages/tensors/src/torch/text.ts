import { truncateForMessage as truncate } from "@ckpt/errors";

/** Longest piece of untrusted text quoted in an error message. */
const MAX_QUOTED_CHARS = 80;

/** Quotes untrusted text for a message: JSON-escaped and cut to MAX_QUOTED_CHARS. */
export function truncateForMessage(value: string): string {
  return truncate(value, MAX_QUOTED_CHARS);
}
