// The one writer of `--json` documents: every command's report and every failure leave the CLI
// through it, so the key convention (snake_case, docs/cli.md "Vocabulary") holds for
// all of them without each report type being rewritten. A versioned document (a record ckpt wrote
// to disk, the evidence bundle) keeps the keys its schema declares: those change only with its version.

/** A camelCase identifier (`hashedBytes`, `mountPoint`); names that are data (paths, tensor names) never match. */
const CAMEL_CASE_IDENTIFIER = /^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+$/;

/** The version a document names (`posttrain.checkpoint-artifact.v1`, `ckpt.evidence.v2`). */
const VERSIONED_SCHEMA = /^(?:ckpt|posttrain)\.[a-z0-9-]+\.v[0-9]+$/;

/** `hashedBytes` → `hashed_bytes`; any other key (already snake_case, a path, a tensor name) unchanged. */
export function snakeCaseKey(key: string): string {
  return CAMEL_CASE_IDENTIFIER.test(key) ? key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) : key;
}

/**
 * A JSON-able value with every camelCase identifier key in snake_case, at any depth, except
 * inside a versioned document (an object whose `schema` names a version), left as it is.
 */
export function snakeCaseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(snakeCaseKeys);
  if (value === null || typeof value !== "object") return value;
  if (isVersionedDocument(value)) return value;
  // toJSON first (a Date, a URL): the document holds what JSON.stringify would write.
  const plain = (value as { toJSON?: () => unknown }).toJSON?.() ?? value;
  if (plain !== value) return snakeCaseKeys(plain);
  return Object.fromEntries(Object.entries(value).map(([key, v]) => [snakeCaseKey(key), snakeCaseKeys(v)]));
}

/** A report as the JSON document `--json` prints: snake_case keys, two-space indent. */
export function jsonReport(report: unknown): string {
  return JSON.stringify(snakeCaseKeys(report), null, 2);
}

function isVersionedDocument(value: object): boolean {
  const schema = (value as { schema?: unknown }).schema;
  return typeof schema === "string" && VERSIONED_SCHEMA.test(schema);
}
