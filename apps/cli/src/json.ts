// The one writer of `--json` documents: every command's report and every failure leave the CLI
// through it, so the key convention (snake_case, docs/cli.md "Vocabulary") holds for
// all of them without each report type being rewritten. ckpt's own versioned documents
// (`ckpt.*`: the evidence bundle, verify and drill reports) declare snake_case keys themselves, so
// they pass through unchanged; a `posttrain.*` record (the on-disk formats the seed specifications
// fix) keeps the keys its specification gives, whatever their case.

/** A camelCase identifier (`hashedBytes`, `mountPoint`); names that are data (paths, tensor names) never match. */
const CAMEL_CASE_IDENTIFIER = /^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+$/;

/** A record format the seed specifications fix (`posttrain.checkpoint-artifact.v1`): its keys are theirs. */
const POSTTRAIN_SCHEMA = /^posttrain\.[a-z0-9-]+\.v[0-9]+$/;

/** `hashedBytes` → `hashed_bytes`; any other key (already snake_case, a path, a tensor name) unchanged. */
export function snakeCaseKey(key: string): string {
  return CAMEL_CASE_IDENTIFIER.test(key) ? key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) : key;
}

/**
 * A JSON-able value with every camelCase identifier key in snake_case, at any depth, except
 * inside a `posttrain.*` record (an object whose `schema` names one), left as it is.
 */
export function snakeCaseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(snakeCaseKeys);
  if (value === null || typeof value !== "object") return value;
  if (isPosttrainRecord(value)) return value;
  // toJSON first (a Date, a URL): the document holds what JSON.stringify would write.
  const plain = (value as { toJSON?: () => unknown }).toJSON?.() ?? value;
  if (plain !== value) return snakeCaseKeys(plain);
  return Object.fromEntries(Object.entries(value).map(([key, v]) => [snakeCaseKey(key), snakeCaseKeys(v)]));
}

/** A report as the JSON document `--json` prints: snake_case keys, two-space indent. */
export function jsonReport(report: unknown): string {
  return JSON.stringify(snakeCaseKeys(report), null, 2);
}

function isPosttrainRecord(value: object): boolean {
  const schema = (value as { schema?: unknown }).schema;
  return typeof schema === "string" && POSTTRAIN_SCHEMA.test(schema);
}
