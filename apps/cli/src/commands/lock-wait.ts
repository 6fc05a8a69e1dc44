import { UsageError } from "../errors.js";

/** `--lock-wait-seconds` of the commands that lock their output (merge, materialize-hf). */
export function lockWaitOption(writer: string) {
  return {
    type: "string",
    describe: `Wait this long for another ${writer} of the same --out (default 120; finite, >= 0)`,
  } as const;
}

/** `--lock-wait-seconds`: plain decimal seconds; `inf`, `nan` and anything else are bad usage. Pure. */
export function parseLockWait(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+(\.\d+)?$/.test(text.trim())) {
    throw new UsageError(
      `--lock-wait-seconds ${JSON.stringify(text)} is not a finite number of seconds >= 0 (inf and nan are refused).`,
    );
  }
  return Number(text);
}
