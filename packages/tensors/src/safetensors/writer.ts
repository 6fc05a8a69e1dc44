import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { ManifestError, writeFileAtomic } from "@ckpt/manifest";
import { DTYPE_BITS, type DType, isSafetensorsDType, packedByteLength } from "../dtypes.js";
import { TensorsError, type TensorsErrorCode } from "../errors.js";
import { HEADER_LENGTH_BYTES, MAX_HEADER_BYTES, MAX_TENSOR_RANK, quote } from "./header.js";

/** A tensor to write: its bytes come later, from the provider, one tensor at a time. */
export interface TensorDescription {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/** A tensor as placed in a planned file. */
export interface PlannedTensor extends TensorDescription {
  readonly byteLength: number;
  /** [begin, end] relative to the data section, as written in the header. */
  readonly dataOffsets: readonly [number, number];
}

/** A safetensors file laid out before any tensor byte is produced. */
export interface SafetensorsPlan {
  /** The 8-byte length prefix and the space-padded JSON header (8 + header is a multiple of 8). */
  readonly headerBytes: Uint8Array;
  readonly tensors: readonly PlannedTensor[];
  /** Length of the whole file. */
  readonly fileSize: number;
}

/**
 * Supplies one tensor's raw little-endian bytes (exactly `byteLength` of them). Called once per
 * tensor, in plan order, and never before the previous tensor's bytes were written.
 */
export type TensorBytesProvider = (tensor: PlannedTensor, index: number) => Uint8Array | Promise<Uint8Array>;

/** Header alignment: the data section starts on an 8-byte boundary so readers can map it as typed arrays. */
const HEADER_ALIGNMENT = 8;

function writeError(code: TensorsErrorCode, message: string, tensor?: string): TensorsError {
  return new TensorsError(code, message, { kind: "input", tensor });
}

function tensorBytes(t: TensorDescription): number {
  if (!isSafetensorsDType(t.dtype)) {
    throw writeError(
      "SAFETENSORS_WRITE_INVALID_TENSOR",
      `plan safetensors tensor ${quote(t.name)}: dtype ${quote(String(t.dtype))} is not supported. Use one of the safetensors dtype names.`,
      t.name,
    );
  }
  if (t.shape.length > MAX_TENSOR_RANK || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw writeError(
      "SAFETENSORS_WRITE_INVALID_TENSOR",
      `plan safetensors tensor ${quote(t.name)}: shape [${t.shape.join(", ")}] is not a list of at most ${MAX_TENSOR_RANK} non-negative integers. Fix the shape.`,
      t.name,
    );
  }
  const elements = t.shape.reduce((a, d) => a * d, 1);
  const bytes = Number.isSafeInteger(elements) ? packedByteLength(t.dtype, elements) : Infinity;
  if (bytes === undefined) {
    throw writeError(
      "SAFETENSORS_WRITE_INVALID_TENSOR",
      `plan safetensors tensor ${quote(t.name)}: shape [${t.shape.join(", ")}] of ${t.dtype} (${DTYPE_BITS[t.dtype]} bits an element) does not end on a byte boundary. Pad the tensor to a whole number of bytes.`,
      t.name,
    );
  }
  if (!Number.isSafeInteger(bytes)) {
    throw writeError(
      "SAFETENSORS_WRITE_INVALID_TENSOR",
      `plan safetensors tensor ${quote(t.name)}: shape [${t.shape.join(", ")}] needs more than 2^53 bytes. Split the tensor.`,
      t.name,
    );
  }
  return bytes;
}

/**
 * Lays out a safetensors file: tensors in the given order, contiguous, after a JSON header
 * (`__metadata__` first) padded with spaces to an 8-byte boundary. Pure.
 */
export function planSafetensors(
  tensors: readonly TensorDescription[],
  metadata: Readonly<Record<string, string>> = {},
): SafetensorsPlan {
  const header: Record<string, unknown> = {};
  const define = (key: string, value: unknown) =>
    Object.defineProperty(header, key, { value, enumerable: true, writable: true, configurable: true });
  for (const [key, value] of Object.entries(metadata)) {
    if (typeof value !== "string") {
      throw writeError(
        "SAFETENSORS_WRITE_INVALID_METADATA",
        `plan safetensors metadata: value of ${quote(key)} is not a string. Metadata values must be strings.`,
      );
    }
  }
  if (Object.keys(metadata).length > 0) define("__metadata__", metadata);
  const planned: PlannedTensor[] = [];
  let cursor = 0;
  for (const t of tensors) {
    if (t.name === "__metadata__" || Object.hasOwn(header, t.name)) {
      throw writeError(
        "SAFETENSORS_WRITE_DUPLICATE_NAME",
        `plan safetensors tensor ${quote(t.name)}: the name is ${t.name === "__metadata__" ? "reserved" : "used twice"}. Give every tensor a unique name.`,
        t.name,
      );
    }
    const byteLength = tensorBytes(t);
    const dataOffsets = [cursor, cursor + byteLength] as const;
    cursor += byteLength;
    planned.push({ name: t.name, dtype: t.dtype, shape: [...t.shape], byteLength, dataOffsets });
    define(t.name, { dtype: t.dtype, shape: t.shape, data_offsets: dataOffsets });
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil((HEADER_LENGTH_BYTES + json.length) / HEADER_ALIGNMENT) * HEADER_ALIGNMENT;
  const headerLength = padded - HEADER_LENGTH_BYTES;
  if (headerLength > MAX_HEADER_BYTES) {
    throw writeError(
      "SAFETENSORS_WRITE_HEADER_TOO_LARGE",
      `plan safetensors header: ${headerLength} bytes exceeds the ${MAX_HEADER_BYTES}-byte limit readers enforce. Write fewer tensors per file.`,
    );
  }
  const headerBytes = new Uint8Array(padded).fill(0x20);
  new DataView(headerBytes.buffer).setBigUint64(0, BigInt(headerLength), true);
  headerBytes.set(json, HEADER_LENGTH_BYTES);
  return { headerBytes, tensors: planned, fileSize: padded + cursor };
}

/** The bytes of a planned file, header first, then each tensor as the provider supplies it. */
export async function* safetensorsChunks(
  plan: SafetensorsPlan,
  provider: TensorBytesProvider,
): AsyncGenerator<Uint8Array> {
  yield plan.headerBytes;
  for (const [index, tensor] of plan.tensors.entries()) {
    const bytes = await provider(tensor, index);
    if (bytes.length !== tensor.byteLength) {
      throw writeError(
        "SAFETENSORS_WRITE_SIZE_MISMATCH",
        `write safetensors tensor ${quote(tensor.name)}: provider gave ${bytes.length} bytes but shape [${tensor.shape.join(", ")}] of ${tensor.dtype} needs ${tensor.byteLength}. Supply the tensor's exact bytes.`,
        tensor.name,
      );
    }
    yield bytes;
  }
}

/** Where a written file is and what it holds. */
export interface WrittenFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
}

/** Writes through a temporary and renames, unwrapping our own errors raised inside the stream. */
async function writeAtomically(
  path: string,
  chunks: AsyncIterable<Uint8Array> | string,
): Promise<WrittenFile> {
  try {
    const { size, sha256 } = await writeFileAtomic(path, chunks);
    return { path, size, sha256 };
  } catch (error) {
    if (error instanceof ManifestError && error.cause instanceof TensorsError) {
      const cause = error.cause;
      throw new TensorsError(cause.code, cause.message, {
        kind: cause.kind,
        file: path,
        tensor: cause.tensor,
        cause,
      });
    }
    throw error;
  }
}

/**
 * Writes one safetensors file at `path`, streaming: the header is computed from the descriptions,
 * then each tensor's bytes are requested and written one at a time. The file appears (by rename
 * of an fsynced temporary) only once complete.
 */
export async function writeSafetensors(
  path: string,
  tensors: readonly TensorDescription[],
  provider: TensorBytesProvider,
  options: { metadata?: Readonly<Record<string, string>> } = {},
): Promise<WrittenFile> {
  const plan = planSafetensors(tensors, options.metadata);
  return writeAtomically(path, safetensorsChunks(plan, provider));
}

/** Most shards a sharded write produces: the file names carry five digits, as Hugging Face's do. */
export const MAX_SHARDS = 99_999;

/** One shard of a sharded write: its file name and the indices of its tensors in the input. */
export interface ShardPlan {
  readonly file: string;
  readonly tensorIndices: readonly number[];
  readonly byteLength: number;
}

/**
 * Groups tensors, in the given order, into shards of at most `maxShardBytes` tensor bytes; a
 * tensor larger than the limit gets a shard of its own. Names them
 * `<prefix>-0000k-of-0000n.safetensors`. Pure.
 */
export function planShards(
  tensors: readonly TensorDescription[],
  maxShardBytes: number,
  prefix = "model",
): ShardPlan[] {
  if (!Number.isSafeInteger(maxShardBytes) || maxShardBytes <= 0) {
    throw writeError(
      "SAFETENSORS_WRITE_INVALID_SHARD_SIZE",
      `plan shards: maximum shard size ${maxShardBytes} is not a positive integer. Pass a byte count such as 5e9.`,
    );
  }
  const groups: { tensorIndices: number[]; byteLength: number }[] = [];
  let current: { tensorIndices: number[]; byteLength: number } | undefined;
  const names = new Set<string>();
  tensors.forEach((t, index) => {
    if (names.has(t.name)) {
      throw writeError(
        "SAFETENSORS_WRITE_DUPLICATE_NAME",
        `plan shards: tensor name ${quote(t.name)} is used twice. Give every tensor a unique name.`,
        t.name,
      );
    }
    names.add(t.name);
    const bytes = tensorBytes(t);
    if (!current || (current.tensorIndices.length > 0 && current.byteLength + bytes > maxShardBytes)) {
      current = { tensorIndices: [], byteLength: 0 };
      groups.push(current);
    }
    current.tensorIndices.push(index);
    current.byteLength += bytes;
  });
  if (groups.length > MAX_SHARDS) {
    throw writeError(
      "SAFETENSORS_WRITE_TOO_MANY_SHARDS",
      `plan shards: ${groups.length} shards exceed the limit of ${MAX_SHARDS}. Raise the maximum shard size.`,
    );
  }
  const total = String(groups.length).padStart(5, "0");
  return groups.map((g, i) => ({
    file: `${prefix}-${String(i + 1).padStart(5, "0")}-of-${total}.safetensors`,
    tensorIndices: g.tensorIndices,
    byteLength: g.byteLength,
  }));
}

/** What a sharded write produced. */
export interface ShardedWriteResult {
  readonly indexFile: WrittenFile;
  readonly shards: readonly WrittenFile[];
  /** `metadata.total_size` of the index: the sum of tensor bytes. */
  readonly totalSize: number;
}

/**
 * Writes `tensors` into `dir` (created if missing) as shards plus `<prefix>.safetensors.index.json` (`metadata.total_size`
 * and `weight_map`). Each shard is written through a temporary and renamed; the index is written
 * last, so a directory with an index has every shard it names.
 */
export async function writeShardedSafetensors(
  dir: string,
  tensors: readonly TensorDescription[],
  provider: TensorBytesProvider,
  options: { maxShardBytes: number; prefix?: string; metadata?: Readonly<Record<string, string>> },
): Promise<ShardedWriteResult> {
  const prefix = options.prefix ?? "model";
  const shardPlans = planShards(tensors, options.maxShardBytes, prefix);
  await mkdir(dir, { recursive: true });
  const weightMap: Record<string, string> = {};
  const shards: WrittenFile[] = [];
  let totalSize = 0;
  for (const shard of shardPlans) {
    const descriptions = shard.tensorIndices.map((i) => tensors[i]!);
    const plan = planSafetensors(descriptions, options.metadata);
    const written = await writeAtomically(
      join(dir, shard.file),
      safetensorsChunks(plan, (t, k) => provider(t, shard.tensorIndices[k]!)),
    );
    shards.push(written);
    for (const t of plan.tensors) {
      Object.defineProperty(weightMap, t.name, { value: shard.file, enumerable: true, writable: true });
      totalSize += t.byteLength;
    }
  }
  const index = { metadata: { total_size: totalSize }, weight_map: weightMap };
  const indexFile = await writeAtomically(
    join(dir, `${prefix}.safetensors.index.json`),
    `${JSON.stringify(index, null, 2)}\n`,
  );
  return { indexFile, shards, totalSize };
}
