/** A record format the seed specifications fix: its keys are theirs, whatever their case. */
const POSTTRAIN_SCHEMA = /^posttrain\.[a-z0-9-]+\.v[0-9]+$/;

const isDocument = (value: object, schema: RegExp): boolean =>
  schema.test(String((value as { schema?: unknown }).schema));

/**
 * Every key of `value` that is an identifier but not snake_case, with where it is. Keys that are
 * names (paths, tensor names: they hold `.` or `/`) are data, not vocabulary; a `posttrain.*`
 * record (a manifest, a receipt) has the keys its specification gives. ckpt's own documents
 * (`schema: "ckpt.evidence.v2"`, ...) are checked like any report.
 */
export function nonSnakeKeys(value: unknown, at = "$"): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => nonSnakeKeys(v, `${at}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  if (isDocument(value, POSTTRAIN_SCHEMA)) return [];
  return Object.entries(value).flatMap(([key, v]) => [
    ...(/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) && /[A-Z]/.test(key) ? [`${at}.${key}`] : []),
    ...nonSnakeKeys(v, `${at}.${key}`),
  ]);
}

/**
 * The non-snake_case keys inside every `ckpt.*` document in `value` (a report before the CLI's
 * writer converts it): those documents declare snake_case keys themselves, so the MCP server and
 * the web view, which serve them without that writer, have the same keys as `--json`.
 */
export function nonSnakeKeysInCkptDocuments(value: unknown, at = "$"): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => nonSnakeKeysInCkptDocuments(v, `${at}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  if (isDocument(value, /^ckpt\.[a-z0-9-]+\.v[0-9]+$/)) return nonSnakeKeys(value, at);
  return Object.entries(value).flatMap(([key, v]) => nonSnakeKeysInCkptDocuments(v, `${at}.${key}`));
}
