/**
 * Every key of `value` that is an identifier but not snake_case, with where it is. Keys that are
 * names (paths, tensor names: they hold `.` or `/`) are data, not vocabulary; a versioned document
 * (`schema: "ckpt.evidence.v2"`, a manifest) has the keys its schema declares.
 */
export function nonSnakeKeys(value: unknown, at = "$"): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => nonSnakeKeys(v, `${at}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  if (/^(?:ckpt|posttrain)\.[a-z0-9-]+\.v[0-9]+$/.test(String((value as { schema?: unknown }).schema)))
    return [];
  return Object.entries(value).flatMap(([key, v]) => [
    ...(/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) && /[A-Z]/.test(key) ? [`${at}.${key}`] : []),
    ...nonSnakeKeys(v, `${at}.${key}`),
  ]);
}
