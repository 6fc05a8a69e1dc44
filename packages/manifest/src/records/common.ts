import { readRegularFile, truncateForMessage } from "@ckpt/errors";
import { z } from "zod";
import { ManifestError, type ManifestErrorCode } from "../errors.js";
import { writeFileAtomic } from "../fs/atomic.js";
import { canonicalJson, compareCodePoints } from "../json/canonical.js";
import { type JsonValue, jsonPath, parseStrictJson } from "../json/strict.js";
import { pathProblem } from "../paths/safe.js";

/** Largest record file read: real records are kilobytes (a DCP inventory a few MiB); 64 MiB bounds memory. */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024;
/** Most entries in one inventory: a DCP component on thousands of ranks stays far below this. */
const MAX_INVENTORY_ENTRIES = 200_000;
/** Longest free-text field (a URI, a source label, a tool version). */
const MAX_TEXT_LENGTH = 4096;
/** Largest iteration number: any value JavaScript and JSON both hold exactly. */
const MAX_ITERATION = Number.MAX_SAFE_INTEGER;
/** Largest byte size: the exact-integer limit of a JSON number as JavaScript reads it (8 PiB). */
const MAX_FILE_SIZE = Number.MAX_SAFE_INTEGER;

// ---------------------------------------------------------------------------------------------
// Building blocks shared by every record schema.

/** Adds an issue whose ManifestError code is `code` (see issueToError). */
export function codedIssue(
  ctx: z.RefinementCtx,
  code: ManifestErrorCode,
  message: string,
  path?: Array<string | number>,
): void {
  ctx.addIssue({ code: "custom", message, params: { code }, ...(path === undefined ? {} : { path }) });
}

/** A relative POSIX path that cannot leave the directory it is joined to. */
export const safeRelativePathSchema = z.string().superRefine((value, ctx) => {
  const problem = pathProblem(value);
  if (problem !== undefined)
    codedIssue(ctx, problem.code, `${problem.reason} (${truncateForMessage(value)})`);
});

/** Lower-case hex SHA-256, the form `sha256sum` prints. */
export const sha256Schema = z.string().superRefine((value, ctx) => {
  if (!/^[0-9a-f]{64}$/.test(value)) {
    codedIssue(ctx, "RECORD_BAD_DIGEST", `${truncateForMessage(value)} is not 64 lower-case hex digits`);
  }
});

export const sizeSchema = z.number().int().min(0).max(MAX_FILE_SIZE);
export const iterationSchema = z.number().int().min(0).max(MAX_ITERATION);

/** One line of printable text: no control characters, bounded length. */
export function textSchema(maxLength = MAX_TEXT_LENGTH) {
  return z
    .string()
    .min(1)
    .max(maxLength)
    .superRefine((value, ctx) => {
      // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
      if (/[\u0000-\u001f\u007f]/.test(value)) {
        codedIssue(ctx, "RECORD_BAD_TEXT", "text contains a control character");
      }
    });
}

/** A file named by path below the record's directory, its size and its SHA-256. */
export const fileEntrySchema = z.strictObject({
  path: safeRelativePathSchema,
  size: sizeSchema,
  sha256: sha256Schema,
});
export type FileEntry = z.infer<typeof fileEntrySchema>;

/** Like FileEntry, but the digest may be absent (files the writer did not hash). */
export const sizedFileEntrySchema = z.strictObject({
  path: safeRelativePathSchema,
  size: sizeSchema,
  sha256: sha256Schema.optional(),
});
export type SizedFileEntry = z.infer<typeof sizedFileEntrySchema>;

/** An inventory: at most MAX_INVENTORY_ENTRIES entries, each path once. */
export function inventorySchema<T extends z.ZodType<{ path: string }>>(entry: T) {
  return z
    .array(entry)
    .max(MAX_INVENTORY_ENTRIES)
    .superRefine((entries, ctx) => refuseDuplicatePaths(entries, ctx));
}

function refuseDuplicatePaths(entries: ReadonlyArray<{ path: string }>, ctx: z.RefinementCtx): void {
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    if (seen.has(entry.path)) {
      codedIssue(ctx, "RECORD_DUPLICATE_PATH", `path ${truncateForMessage(entry.path)} is listed twice`, [
        i,
        "path",
      ]);
    }
    seen.add(entry.path);
  });
}

/** Inventories are written sorted by path so equal inventories serialize to equal bytes. */
export function sortByPath<T extends { path: string }>(entries: readonly T[]): T[] {
  return [...entries].sort((a, b) => compareCodePoints(a.path, b.path));
}

// ---------------------------------------------------------------------------------------------
// Record descriptions and the generic validate / parse / read / serialize machinery.

/**
 * Everything the generic functions need to know about one kind of record: its conventional file
 * name, the field holding its version and the versions this library reads, and the schema of
 * the current version. `normalize` puts a valid value in canonical order before it is written.
 */
export interface RecordSchema<T> {
  readonly title: string;
  readonly fileName: string;
  readonly versionField: string;
  readonly versions: readonly string[];
  readonly schema: z.ZodType<T>;
  readonly normalize?: (value: T) => T;
}

type ValidationResult<T> = { ok: true; value: T } | { ok: false; error: ManifestError };

type RecordLabel = Pick<RecordSchema<unknown>, "title" | "fileName">;

function fieldError(
  spec: RecordLabel,
  name: string,
  code: ManifestErrorCode,
  field: string | undefined,
  what: string,
): ManifestError {
  const at = field === undefined ? "" : `field ${field}: `;
  // zod's messages start with a capital; they continue a sentence here.
  const detail = what.charAt(0).toLowerCase() + what.slice(1);
  return new ManifestError(
    code,
    `validate ${spec.title} ${name}: ${at}${detail}. See docs/formats.md for the ${spec.fileName} format.`,
    { kind: "input", file: name, field },
  );
}

function issueToError(spec: RecordLabel, name: string, issue: z.core.$ZodIssue): ManifestError {
  const segments = issue.path.filter((s): s is string | number => typeof s !== "symbol");
  let code: ManifestErrorCode = "RECORD_INVALID";
  let what = issue.message;
  switch (issue.code) {
    case "invalid_type":
      // Parsed JSON never holds undefined, so an undefined input is an absent field.
      code = issue.input === undefined ? "RECORD_MISSING_FIELD" : "RECORD_WRONG_TYPE";
      if (issue.input === undefined) what = `is missing (expected ${issue.expected})`;
      break;
    case "invalid_key": {
      const inner = issue.issues[0];
      const custom = inner?.code === "custom" ? inner.params?.code : undefined;
      code = typeof custom === "string" ? (custom as ManifestErrorCode) : "RECORD_INVALID_VALUE";
      what = `has an invalid key: ${inner?.message ?? "not allowed"}`;
      break;
    }
    case "unrecognized_keys": {
      const key = issue.keys[0] ?? "";
      code = "RECORD_UNKNOWN_FIELD";
      what = `unknown field ${truncateForMessage(key)}; a record lists only the fields of its version`;
      segments.push(key);
      break;
    }
    case "too_small":
    case "too_big":
      code = issue.origin === "array" ? "RECORD_WRONG_COUNT" : "RECORD_OUT_OF_RANGE";
      if (issue.origin === "string") code = "RECORD_BAD_TEXT";
      break;
    case "invalid_value":
      code = "RECORD_INVALID_VALUE";
      break;
    case "invalid_union":
      code = "RECORD_INVALID_VALUE";
      what = "matches none of the allowed shapes";
      break;
    case "custom": {
      const custom = issue.params?.code;
      // codedIssue put it there, typed.
      if (typeof custom === "string") code = custom as ManifestErrorCode;
      break;
    }
    default:
      break;
  }
  const field = segments.length === 0 ? undefined : jsonPath(segments);
  return fieldError(spec, name, code, field, what);
}

/**
 * Checks a parsed JSON value against a record schema. The version field is checked first, so a
 * record of an unknown version is refused as such rather than as a pile of shape errors. Pure.
 */
function validateRecord<T>(spec: RecordSchema<T>, json: unknown, name: string): ValidationResult<T> {
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    return {
      ok: false,
      error: fieldError(spec, name, "RECORD_NOT_OBJECT", undefined, "the document is not a JSON object"),
    };
  }
  const version = (json as Record<string, unknown>)[spec.versionField];
  if (version === undefined) {
    const error = fieldError(
      spec,
      name,
      "RECORD_MISSING_FIELD",
      spec.versionField,
      `is missing; expected ${spec.versions.join(" or ")}`,
    );
    return { ok: false, error };
  }
  if (typeof version !== "string" || !spec.versions.includes(version)) {
    const shown = typeof version === "string" ? truncateForMessage(version) : `a ${typeof version}`;
    const error = fieldError(
      spec,
      name,
      "RECORD_UNKNOWN_VERSION",
      spec.versionField,
      `is ${shown}; this version of ckpt reads ${spec.versions.join(" or ")}. A newer ckpt may read it`,
    );
    return { ok: false, error };
  }
  const result = spec.schema.safeParse(json, { reportInput: true });
  if (result.success) return { ok: true, value: result.data };
  const first = result.error.issues[0];
  if (first === undefined) {
    return { ok: false, error: fieldError(spec, name, "RECORD_INVALID", undefined, "is not valid") };
  }
  return { ok: false, error: issueToError(spec, name, first) };
}

/** Decodes strict UTF-8 (no replacement characters; a BOM is kept so the parser can name it). */
export function decodeUtf8(bytes: Uint8Array, name: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (cause) {
    throw new ManifestError(
      "RECORD_NOT_UTF8",
      `decode ${name}: the bytes are not valid UTF-8. Records are UTF-8 JSON; the file is damaged or not a record.`,
      { kind: "input", file: name, cause },
    );
  }
}

/** Parses and validates record bytes; throws a ManifestError naming `name` on any problem. */
function parseRecordBytes<T>(spec: RecordSchema<T>, bytes: Uint8Array, name: string): T {
  if (bytes.byteLength > MAX_RECORD_BYTES) throw tooLarge(name, bytes.byteLength);
  const json: JsonValue = parseStrictJson(decodeUtf8(bytes, name), { name });
  const result = validateRecord(spec, json, name);
  if (!result.ok) throw result.error;
  return result.value;
}

function tooLarge(name: string, size: number, maxBytes = MAX_RECORD_BYTES): ManifestError {
  return new ManifestError(
    "RECORD_TOO_LARGE",
    `read ${name}: the file is ${size} bytes; it may be at most ${maxBytes} bytes. It is not a ckpt record.`,
    { kind: "input", file: name },
  );
}

/**
 * Reads at most `maxBytes` of a regular file (@ckpt/errors' guarded open: a FIFO or device is
 * refused without blocking, an oversized file before a byte is read, a growing one while read).
 */
export async function readBoundedFile(
  path: string,
  maxBytes: number = MAX_RECORD_BYTES,
): Promise<Uint8Array> {
  const read = await readRegularFile(path, { maxBytes });
  if (read.ok) return read.bytes;
  switch (read.reason) {
    case "missing":
      throw new ManifestError("RECORD_NOT_FOUND", `read ${path}: the file does not exist.`, {
        kind: "input",
        file: path,
        cause: read.cause,
      });
    case "not-a-file":
      throw new ManifestError(
        "RECORD_NOT_A_FILE",
        `read ${path}: it is ${read.what}, not a regular file. Records are files; remove it.`,
        { kind: "input", file: path },
      );
    case "too-large":
      throw tooLarge(path, read.size, maxBytes);
    case "grew":
      throw new ManifestError(
        "RECORD_CHANGED_WHILE_READING",
        `read ${path}: the file grew while it was being read. Retry once its writer has finished.`,
        { file: path, kind: "transient" },
      );
    case "unreadable":
      throw new ManifestError(
        "RECORD_READ_FAILED",
        `read ${path}: cannot open it (${read.errno}). Check permissions.`,
        { file: path, cause: read.cause, kind: "failed" },
      );
  }
}

/** Reads, parses and validates a record file; errors name `path`. */
async function readRecordFile<T>(path: string, spec: RecordSchema<T>): Promise<T> {
  const bytes = await readBoundedFile(path);
  return parseRecordBytes(spec, bytes, path);
}

/**
 * Validates `value` and returns its canonical bytes. An invalid value is refused, so a record
 * with an unsafe path or a wrong digest can never be written by this library.
 */
export function serializeRecord<T>(
  spec: RecordSchema<T>,
  value: T,
  name: string = spec.fileName,
): Uint8Array {
  const result = validateRecord(spec, value, name);
  if (!result.ok) throw result.error;
  const normalized = spec.normalize ? spec.normalize(result.value) : result.value;
  return new TextEncoder().encode(canonicalJson(normalized));
}

/**
 * Validates `value` and writes its canonical bytes atomically (temporary, fsync, rename,
 * directory fsync), so a reader sees the old record or the new one, never a torn one.
 */
async function writeRecordFile<T>(path: string, spec: RecordSchema<T>, value: T): Promise<void> {
  await writeFileAtomic(path, serializeRecord(spec, value, path));
}

/**
 * One kind of record as an object: its description (file name, version field, zod schema) and the
 * pure and I/O entry points bound to it. `version` is the version this library writes, the first of
 * `versions`.
 */
export interface RecordApi<T, V extends string = string> extends RecordSchema<T> {
  readonly version: V;
  validate(json: unknown, name?: string): ValidationResult<T>;
  parse(bytes: Uint8Array, name?: string): T;
  read(path: string): Promise<T>;
  serialize(value: T): Uint8Array;
  write(path: string, value: T): Promise<void>;
}

export function recordApi<T, V extends string>(
  spec: RecordSchema<T> & { readonly versions: readonly V[] },
): RecordApi<T, V> {
  return {
    ...spec,
    // Every description lists at least its current version.
    version: spec.versions[0]!,
    validate: (json, name = spec.fileName) => validateRecord(spec, json, name),
    parse: (bytes, name = spec.fileName) => parseRecordBytes(spec, bytes, name),
    read: (path) => readRecordFile(path, spec),
    serialize: (value) => serializeRecord(spec, value),
    write: (path, value) => writeRecordFile(path, spec, value),
  };
}

// ---------------------------------------------------------------------------------------------
// Destination identity, shared by the archive receipt and the fetch record.

/** Longest endpoint authority: a DNS name (253) plus a port. */
const MAX_ENDPOINT_LENGTH = 260;

/**
 * Where an archive lives, without any secret: the store scheme, the endpoint authority
 * (host[:port]; `local` for file://), the bucket (for file:// the absolute root directory) and
 * the key prefix below it ("" for the bucket root).
 */
export const destinationSchema = z.strictObject({
  scheme: z.enum(["s3", "gs", "file", "memory"]),
  endpoint: textSchema(MAX_ENDPOINT_LENGTH).superRefine((value, ctx) => {
    // A scheme, a path or user info would mean a URL (and perhaps a secret) was stored instead of an authority.
    if (/[/@\s]/.test(value)) {
      codedIssue(ctx, "RECORD_BAD_TEXT", "an endpoint is host[:port], without scheme, user info or path");
    }
  }),
  bucket: textSchema(),
  prefix: z.string().superRefine((value, ctx) => {
    if (value === "") return;
    const problem = pathProblem(value);
    if (problem !== undefined)
      codedIssue(ctx, problem.code, `${problem.reason} (${truncateForMessage(value)})`);
  }),
});
export type Destination = z.infer<typeof destinationSchema>;
