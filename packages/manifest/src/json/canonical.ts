import { ManifestError } from "../errors.js";

/**
 * Orders strings by Unicode code point, which is also the byte order of their UTF-8 encodings
 * (the order object stores list keys in, and the order Python's sorted() gives).
 */
export function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0;
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

/**
 * The one byte form every ckpt record is written in: object keys sorted by code point, two-space
 * indentation, no trailing spaces, raw (unescaped) UTF-8 for non-ASCII, and a final newline. The
 * same value always yields the same text, so a digest of a record is reproducible. Omits object
 * members whose value is undefined; refuses other values JSON cannot represent (functions, non-finite numbers, bigints) instead of dropping them.
 */
export function canonicalJson(value: unknown): string {
  return `${render(value, "", "$")}\n`;
}

function render(value: unknown, indent: string, where: string): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw unrepresentable(where, String(value));
      return JSON.stringify(value);
    case "object": {
      const inner = `${indent}  `;
      if (Array.isArray(value)) {
        if (value.length === 0) return "[]";
        const items = value.map((item, i) => inner + render(item, inner, `${where}[${i}]`));
        return `[\n${items.join(",\n")}\n${indent}]`;
      }
      const keys = Object.keys(value).sort(compareCodePoints);
      const entries: string[] = [];
      for (const key of keys) {
        const v = (value as Record<string, unknown>)[key];
        // An absent optional field and one set to undefined must give the same bytes.
        if (v === undefined) continue;
        entries.push(`${inner}${JSON.stringify(key)}: ${render(v, inner, `${where}.${key}`)}`);
      }
      if (entries.length === 0) return "{}";
      return `{\n${entries.join(",\n")}\n${indent}}`;
    }
    default:
      throw unrepresentable(where, typeof value);
  }
}

function unrepresentable(where: string, what: string): ManifestError {
  return new ManifestError(
    "RECORD_NOT_SERIALIZABLE",
    `serialize record: ${where} is ${what}, which JSON cannot represent. Use null or omit the field.`,
    { field: where, kind: "input" },
  );
}
