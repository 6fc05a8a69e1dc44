import { ManifestError, parseStrictJson } from "@ckpt/manifest";
import { DTYPE_BITS, type DType, isSafetensorsDType, packedByteLength, type TensorInfo } from "../dtypes.js";
import { TensorsError, type TensorsErrorCode } from "../errors.js";

/** Largest accepted JSON header: matches the reference implementation's 100 MB limit; real headers are < 10 MiB. */
export const MAX_HEADER_BYTES = 100 * 1024 * 1024;
/** Most dimensions a tensor may have: numpy allows 64, torch fewer; bounds the shape loop of a crafted entry. */
export const MAX_TENSOR_RANK = 64;
/** A valid header nests three levels (header, entry, shape); a little headroom keeps field errors precise while bounding recursion. */
const MAX_HEADER_JSON_DEPTH = 8;
/** Untrusted names and values quoted in messages are cut to this many characters. */
const QUOTE_LIMIT = 80;
/** Largest element count the reference's u64 arithmetic holds. */
const MAX_U64 = 2n ** 64n - 1n;
/** Bytes before the JSON: the header length as a little-endian u64. */
export const HEADER_LENGTH_BYTES = 8;

/** One tensor of a safetensors file: what it is and where its bytes are. */
export interface SafetensorsTensorInfo extends TensorInfo {
  /** Absolute file offset of the tensor's first byte (8 + header length + data_offsets[0]). */
  readonly dataOffset: number;
  /** `data_offsets` as written: begin and end relative to the start of the data section. */
  readonly dataOffsets: readonly [number, number];
}

/** A validated safetensors header. */
export interface SafetensorsHeader {
  /** Length of the JSON header in bytes (the u64 prefix), padding included. */
  readonly headerByteLength: number;
  /** Absolute offset of the data section: 8 + header length. */
  readonly dataStart: number;
  /** Length of the data section: the last tensor's end offset. */
  readonly dataByteLength: number;
  /** Every tensor, in data order (ascending offsets), which is the order to read them in. */
  readonly tensors: readonly SafetensorsTensorInfo[];
  /** `__metadata__`, or an empty object when the file has none. */
  readonly metadata: Readonly<Record<string, string>>;
}

/** Quotes an untrusted string for a message, cut to a bounded length, control characters escaped. */
export function quote(text: string): string {
  return JSON.stringify(text.length > QUOTE_LIMIT ? `${text.slice(0, QUOTE_LIMIT)}…` : text);
}

const CORRUPT_HINT = "The file is corrupt, truncated or was not written by a safetensors writer";

function headerError(
  code: TensorsErrorCode,
  file: string,
  what: string,
  tensor?: string,
  cause?: unknown,
): TensorsError {
  const subject = tensor === undefined ? "" : ` tensor ${quote(tensor)}`;
  return new TensorsError(code, `read safetensors header of ${file}:${subject} ${what}. ${CORRUPT_HINT}.`, {
    kind: "input",
    file,
    tensor,
    cause,
  });
}

/**
 * Reads the u64 header length from the first 8 bytes and checks it against the caps and the file
 * size. Returns the header length in bytes.
 */
export function readHeaderLength(prefix: Uint8Array, fileSize: number, file: string): number {
  if (fileSize < HEADER_LENGTH_BYTES || prefix.length < HEADER_LENGTH_BYTES) {
    throw headerError(
      "SAFETENSORS_FILE_TOO_SMALL",
      file,
      `file is ${fileSize} bytes; a safetensors file starts with an 8-byte header length`,
    );
  }
  const view = new DataView(prefix.buffer, prefix.byteOffset, HEADER_LENGTH_BYTES);
  const length = view.getBigUint64(0, true);
  if (length > BigInt(MAX_HEADER_BYTES)) {
    throw headerError(
      "SAFETENSORS_HEADER_TOO_LARGE",
      file,
      `header length is ${length} bytes; the limit is ${MAX_HEADER_BYTES}`,
    );
  }
  const n = Number(length);
  if (n > fileSize - HEADER_LENGTH_BYTES) {
    throw headerError(
      "SAFETENSORS_HEADER_PAST_EOF",
      file,
      `header length ${n} runs past the end of the file (${fileSize} bytes)`,
    );
  }
  if (n === 0) throw headerError("SAFETENSORS_HEADER_NOT_JSON", file, "header is empty");
  return n;
}

const JSON_CODE_MAP: Record<string, TensorsErrorCode> = {
  JSON_DUPLICATE_KEY: "SAFETENSORS_HEADER_DUPLICATE_KEY",
  JSON_TOO_DEEP: "SAFETENSORS_HEADER_TOO_DEEP",
  JSON_NUMBER_OUT_OF_RANGE: "SAFETENSORS_HEADER_NUMBER_OUT_OF_RANGE",
};

/** The code of a number written with a fraction or exponent, by the field it is in (`w.shape[0]`). */
function notIntegerCode(field: string | undefined): TensorsErrorCode {
  if (field?.startsWith("__metadata__")) return "SAFETENSORS_METADATA_INVALID";
  if (field !== undefined && /\.shape\[\d+\]$/.test(field)) return "SAFETENSORS_SHAPE_INVALID";
  if (field !== undefined && /\.data_offsets\[\d+\]$/.test(field)) return "SAFETENSORS_OFFSETS_INVALID";
  return "SAFETENSORS_ENTRY_INVALID";
}

function decodeHeaderText(bytes: Uint8Array, file: string): string {
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw headerError("SAFETENSORS_HEADER_BOM", file, "header starts with a UTF-8 byte-order mark");
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (error) {
    throw headerError("SAFETENSORS_HEADER_NOT_UTF8", file, "header is not valid UTF-8", undefined, error);
  }
}

function parseHeaderJsonSync(text: string, file: string): unknown {
  if (text.charCodeAt(0) !== 0x7b /* { */) {
    throw headerError("SAFETENSORS_HEADER_NOT_OBJECT", file, "header does not start with '{'");
  }
  try {
    return parseStrictJson(text, {
      name: file,
      maxDepth: MAX_HEADER_JSON_DEPTH,
      maxLength: MAX_HEADER_BYTES,
      // Every number of the format is an integer; `1.0` or `4e0` is refused as the reference parser does.
      integersOnly: true,
    });
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    const code =
      error.code === "JSON_NOT_INTEGER"
        ? notIntegerCode(error.field)
        : (JSON_CODE_MAP[error.code] ?? "SAFETENSORS_HEADER_NOT_JSON");
    const detail = error.message.startsWith(`parse ${file}: `)
      ? error.message.slice(`parse ${file}: `.length)
      : error.message;
    throw new TensorsError(code, `read safetensors header of ${file}: invalid JSON: ${detail}`, {
      kind: "input",
      file,
      cause: error,
    });
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0);
}

/** Renders a shape for a message, eliding the middle of very long ones. */
function formatShape(shape: readonly unknown[]): string {
  const shown = shape.length > 8 ? [...shape.slice(0, 4), "…", ...shape.slice(-2)] : shape;
  return `[${shown.join(", ")}]`;
}

function describeValue(value: unknown): string {
  if (typeof value === "string") return quote(value);
  if (Object.is(value, -0)) return "-0";
  if (Array.isArray(value)) return "an array";
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  return String(value);
}

function validateShape(shape: unknown, dtype: DType, file: string, name: string): number {
  if (!Array.isArray(shape)) {
    throw headerError(
      "SAFETENSORS_SHAPE_INVALID",
      file,
      `shape is ${describeValue(shape)}, not a list`,
      name,
    );
  }
  if (shape.length > MAX_TENSOR_RANK) {
    throw headerError(
      "SAFETENSORS_SHAPE_RANK_TOO_LARGE",
      file,
      `shape has ${shape.length} dimensions; the limit is ${MAX_TENSOR_RANK}`,
      name,
    );
  }
  // The element count is folded left to right as the reference does in u64: a running product past
  // 2^64 is refused even when a later dimension is zero, so both refuse [2^52, 2^52, 0].
  let elements = 1n;
  for (const dim of shape) {
    if (!isCount(dim)) {
      throw headerError(
        "SAFETENSORS_SHAPE_INVALID",
        file,
        `shape has dimension ${describeValue(dim)}; dimensions are non-negative integers`,
        name,
      );
    }
    elements *= BigInt(dim);
    if (elements > MAX_U64) {
      throw headerError(
        "SAFETENSORS_SHAPE_TOO_LARGE",
        file,
        `shape ${formatShape(shape)} has more than 2^64 elements`,
        name,
      );
    }
  }
  const bytes =
    elements > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : packedByteLength(dtype, Number(elements));
  if (bytes === undefined) {
    throw headerError(
      "SAFETENSORS_SHAPE_MISALIGNED",
      file,
      `shape ${formatShape(shape)} of ${dtype} (${DTYPE_BITS[dtype]} bits an element) does not end on a byte boundary`,
      name,
    );
  }
  if (!Number.isSafeInteger(bytes)) {
    throw headerError(
      "SAFETENSORS_SHAPE_TOO_LARGE",
      file,
      `shape ${formatShape(shape)} of ${dtype} needs more than 2^53 bytes`,
      name,
    );
  }
  return bytes;
}

interface Entry {
  name: string;
  dtype: DType;
  shape: number[];
  byteLength: number;
  begin: number;
  end: number;
}

const ENTRY_FIELDS = new Set(["dtype", "shape", "data_offsets"]);

function validateEntry(name: string, value: unknown, file: string): Entry {
  if (!isPlainObject(value)) {
    throw headerError(
      "SAFETENSORS_ENTRY_INVALID",
      file,
      `entry is ${describeValue(value)}, not an object`,
      name,
    );
  }
  for (const key of Object.keys(value)) {
    if (!ENTRY_FIELDS.has(key)) {
      throw headerError(
        "SAFETENSORS_ENTRY_INVALID",
        file,
        `entry has unknown field ${quote(key)}; entries hold dtype, shape and data_offsets`,
        name,
      );
    }
  }
  const { dtype, shape, data_offsets: offsets } = value;
  if (typeof dtype !== "string" || !isSafetensorsDType(dtype)) {
    throw headerError(
      "SAFETENSORS_DTYPE_UNKNOWN",
      file,
      `dtype ${describeValue(dtype)} is not supported`,
      name,
    );
  }
  const byteLength = validateShape(shape, dtype, file, name);
  if (!Array.isArray(offsets) || offsets.length !== 2 || !isCount(offsets[0]) || !isCount(offsets[1])) {
    throw headerError(
      "SAFETENSORS_OFFSETS_INVALID",
      file,
      `data_offsets is ${Array.isArray(offsets) ? `[${offsets.map(describeValue).join(", ")}]` : describeValue(offsets)}; expected [begin, end], two non-negative integers`,
      name,
    );
  }
  const [begin, end] = offsets as [number, number];
  if (end < begin) {
    throw headerError(
      "SAFETENSORS_OFFSETS_INVALID",
      file,
      `data_offsets [${begin}, ${end}] end before they begin`,
      name,
    );
  }
  if (end - begin !== byteLength) {
    throw headerError(
      "SAFETENSORS_OFFSETS_SIZE_MISMATCH",
      file,
      `data_offsets [${begin}, ${end}] span ${end - begin} bytes but shape ${formatShape(shape as number[])} of ${dtype} needs ${byteLength}`,
      name,
    );
  }
  return { name, dtype, shape: shape as number[], byteLength, begin, end };
}

function validateMetadata(value: unknown, file: string): Record<string, string> {
  if (!isPlainObject(value)) {
    throw headerError(
      "SAFETENSORS_METADATA_INVALID",
      file,
      `__metadata__ is ${describeValue(value)}, not an object`,
    );
  }
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== "string") {
      throw headerError(
        "SAFETENSORS_METADATA_INVALID",
        file,
        `__metadata__[${quote(key)}] is ${describeValue(v)}; metadata values are strings`,
      );
    }
    Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * Validates the JSON header of a safetensors file (the bytes after the 8-byte length) and, when
 * `fileSize` is given, that the file is exactly 8 + header + data bytes long. Pure: no I/O.
 * Accepts trailing whitespace padding. Throws TensorsError with a `SAFETENSORS_*` code.
 */
export function parseSafetensorsHeader(
  headerBytes: Uint8Array,
  options: { file: string; fileSize?: number },
): SafetensorsHeader {
  const { file } = options;
  if (headerBytes.length > MAX_HEADER_BYTES) {
    throw headerError(
      "SAFETENSORS_HEADER_TOO_LARGE",
      file,
      `header is ${headerBytes.length} bytes; the limit is ${MAX_HEADER_BYTES}`,
    );
  }
  if (headerBytes.length === 0) throw headerError("SAFETENSORS_HEADER_NOT_JSON", file, "header is empty");
  const json = parseHeaderJsonSync(decodeHeaderText(headerBytes, file), file);
  if (!isPlainObject(json)) {
    throw headerError("SAFETENSORS_HEADER_NOT_OBJECT", file, "header is not a JSON object");
  }
  let metadata: Record<string, string> = {};
  const entries: Entry[] = [];
  for (const [name, value] of Object.entries(json)) {
    if (name === "__metadata__") metadata = validateMetadata(value, file);
    else entries.push(validateEntry(name, value, file));
  }
  entries.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let cursor = 0;
  let previous: Entry | undefined;
  for (const entry of entries) {
    if (entry.begin < cursor) {
      throw headerError(
        "SAFETENSORS_OFFSETS_OVERLAP",
        file,
        `data_offsets [${entry.begin}, ${entry.end}] overlap tensor ${quote(previous!.name)} ending at ${cursor}`,
        entry.name,
      );
    }
    if (entry.begin > cursor) {
      throw headerError(
        "SAFETENSORS_OFFSETS_GAP",
        file,
        `data_offsets [${entry.begin}, ${entry.end}] leave ${entry.begin - cursor} unused bytes after offset ${cursor}`,
        entry.name,
      );
    }
    cursor = entry.end;
    previous = entry;
  }
  const dataStart = HEADER_LENGTH_BYTES + headerBytes.length;
  if (options.fileSize !== undefined) {
    const expected = dataStart + cursor;
    if (options.fileSize < expected) {
      throw headerError(
        "SAFETENSORS_TRUNCATED",
        file,
        `data runs to byte ${expected} but the file has ${options.fileSize} bytes`,
        previous?.name,
      );
    }
    if (options.fileSize > expected) {
      throw headerError(
        "SAFETENSORS_TRAILING_BYTES",
        file,
        `file has ${options.fileSize - expected} bytes after the last tensor (data ends at ${expected})`,
      );
    }
  }
  return {
    headerByteLength: headerBytes.length,
    dataStart,
    dataByteLength: cursor,
    tensors: entries.map((e) => ({
      name: e.name,
      dtype: e.dtype,
      shape: e.shape,
      byteLength: e.byteLength,
      dataOffset: dataStart + e.begin,
      dataOffsets: [e.begin, e.end] as const,
    })),
    metadata,
  };
}
