import { describeRefusal, readRegularFile } from "@ckpt/errors";
import { join } from "node:path";
import type { DType } from "../dtypes.js";
import { TensorsError, type TensorsErrorCode } from "../errors.js";
import { allowListGlobals } from "../torch/pickle/allow-list.js";
import { DCP_GLOBALS } from "../torch/pickle/dcp-globals.js";
import { MAX_PICKLE_BYTES, type UnpicklePolicy, unpickle } from "../torch/pickle/unpickler.js";
import { PickleDict, PickleGlobal, PickleObject, PickleTuple } from "../torch/pickle/values.js";
import { truncateForMessage } from "../torch/text.js";
import { TORCH_DTYPE_NAMES } from "../torch/torch-types.js";

/** The file torch.distributed.checkpoint writes next to its shards. */
export const DCP_METADATA_FILE = ".metadata";
/** Dimensions of one DCP tensor (same bound as torch tensors). */
const MAX_DCP_TENSOR_DIMS = 64;
/**
 * Chunks of one tensor: a chunk per shard, so at most the world size (2^17 is beyond any real job).
 * A memoised pickle can repeat one chunk millions of times in a few bytes; this bounds the work.
 */
const MAX_DCP_CHUNKS_PER_TENSOR = 131_072;
/** Chunks of all tensors together (bounds memory when many tensors share one memoised list). */
const MAX_DCP_CHUNKS = 4_194_304;

/** One stored piece: which file, where, how long. */
export interface DcpStorageInfo {
  readonly relativePath: string;
  readonly offset: number;
  readonly length: number;
  readonly transformDescriptors: readonly string[];
}

export interface DcpChunk {
  readonly offsets: readonly number[];
  readonly sizes: readonly number[];
  /** Where the chunk's bytes are; undefined when storage_data has no entry for it. */
  readonly storage: DcpStorageInfo | undefined;
}

export interface DcpTensor {
  readonly fqn: string;
  /** The element type in ckpt's names, when ckpt has one (complex types do not). */
  readonly dtype: DType | undefined;
  /** torch's name for the element type, e.g. "bfloat16". */
  readonly torchDtype: string;
  /** The global (unsharded) shape. */
  readonly shape: readonly number[];
  readonly chunks: readonly DcpChunk[];
}

export interface DcpBytesEntry {
  readonly fqn: string;
  readonly storage: DcpStorageInfo | undefined;
}

export interface DcpMetadata {
  readonly file: string;
  readonly tensors: readonly DcpTensor[];
  readonly bytes: readonly DcpBytesEntry[];
  /** Every storage entry, in metadata order. */
  readonly storage: readonly (DcpStorageInfo & {
    readonly fqn: string;
    readonly chunkOffsets: readonly number[] | undefined;
  })[];
  /** Each referenced file once, with the least length it must have (max offset + length). */
  readonly files: readonly { readonly relativePath: string; readonly requiredLength: number }[];
  readonly version: string | undefined;
  /** The save planner's data: each fqn's path in the nested state dict (DefaultSavePlanner's mapping). */
  readonly plannerData: Readonly<Record<string, readonly (string | number)[]>>;
}

function dcpPolicy(file: string): UnpicklePolicy {
  const fail = (code: TensorsErrorCode, message: string): never => {
    throw new TensorsError(code, `unpickle ${DCP_METADATA_FILE} of ${file}: ${message}`, {
      kind: "input",
      file,
    });
  };
  return {
    ...allowListGlobals(DCP_GLOBALS, { file, what: DCP_METADATA_FILE }, fail, {
      call: (callable) =>
        fail(
          "PICKLE_CALL_REFUSED",
          `${truncateForMessage(callable.qualifiedName)} cannot be called this way`,
        ),
      newObject: (cls) =>
        fail("PICKLE_CALL_REFUSED", `NEWOBJ of ${truncateForMessage(cls.qualifiedName)} is not allowed`),
    }),
    build(target, state) {
      if (target instanceof PickleObject && target.state === null) {
        target.state = state;
        return;
      }
      if (target instanceof PickleDict && state instanceof PickleDict) {
        for (const [key, value] of state.map) if (typeof key === "string") target.attributes.set(key, value);
        return;
      }
      fail("PICKLE_INVALID", "BUILD on something other than a fresh DCP object");
    },
    persistentLoad() {
      return fail("PICKLE_OPCODE_REFUSED", "persistent ids do not occur in DCP metadata");
    },
  };
}

/** Parses the bytes of a DCP `.metadata` pickle with the DCP allow-list. */
export function parseDcpMetadata(bytes: Uint8Array, file: string): DcpMetadata {
  const invalid = (message: string): never => {
    throw new TensorsError("DCP_METADATA_INVALID", `read DCP metadata ${file}: ${message}`, {
      kind: "input",
      file,
    });
  };
  const root = unpickle(bytes, dcpPolicy(file), file, DCP_METADATA_FILE);
  const isA = (value: unknown, name: string): value is PickleObject =>
    value instanceof PickleObject && value.cls.name === name;
  const field = (obj: PickleObject, name: string): unknown => {
    const { state } = obj;
    if (state instanceof PickleDict) return state.map.get(name);
    // Dataclasses with a `__dict__` and slots state pickle as (dict, slots).
    if (state instanceof PickleTuple && state.items[0] instanceof PickleDict)
      return state.items[0].map.get(name);
    return undefined;
  };
  const ints = (value: unknown, what: string): number[] => {
    const items =
      value instanceof PickleTuple
        ? value.items
        : Array.isArray(value)
          ? value
          : invalid(`${what} is not a tuple`);
    if (items.length > MAX_DCP_TENSOR_DIMS)
      invalid(`${what} has ${items.length} dimensions; max ${MAX_DCP_TENSOR_DIMS}`);
    return items.map((n) =>
      typeof n === "number" && Number.isSafeInteger(n) && n >= 0
        ? n
        : invalid(`${what} holds ${truncateForMessage(String(n))}`),
    );
  };
  const count = (value: unknown, what: string): number =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0
      ? value
      : invalid(`${what} is not a non-negative integer`);
  if (!isA(root, "Metadata")) return invalid("the pickle is not a torch.distributed.checkpoint Metadata");
  const sdm = field(root, "state_dict_metadata");
  if (!(sdm instanceof PickleDict)) return invalid("state_dict_metadata is not a dict");

  const storageByKey = new Map<string, DcpStorageInfo>();
  const storage: DcpMetadata["storage"][number][] = [];
  const storageData = field(root, "storage_data");
  if (storageData !== null && storageData !== undefined) {
    if (!(storageData instanceof PickleDict)) return invalid("storage_data is not a dict");
    if (storageData.map.size > MAX_DCP_CHUNKS) {
      throw new TensorsError(
        "DCP_CHUNKS_TOO_MANY",
        `read DCP metadata ${file}: storage_data has ${storageData.map.size} entries; max ${MAX_DCP_CHUNKS}`,
        { kind: "input", file },
      );
    }
    for (const [key, value] of storageData.map) {
      if (!isA(key, "MetadataIndex") || !isA(value, "_StorageInfo"))
        return invalid("storage_data is not MetadataIndex -> _StorageInfo");
      const fqn = field(key, "fqn");
      if (typeof fqn !== "string") return invalid("a MetadataIndex has no fqn");
      const offsetValue = field(key, "offset");
      const chunkOffsets =
        offsetValue === null || offsetValue === undefined ? undefined : ints(offsetValue, `offset of ${fqn}`);
      const relativePath = field(value, "relative_path");
      if (typeof relativePath !== "string")
        return invalid(`storage of ${truncateForMessage(fqn)} has no relative_path`);
      checkRelativePath(relativePath, file);
      const descriptors = field(value, "transform_descriptors");
      const info: DcpStorageInfo = {
        relativePath,
        offset: count(field(value, "offset"), `storage offset of ${fqn}`),
        length: count(field(value, "length"), `storage length of ${fqn}`),
        transformDescriptors:
          Array.isArray(descriptors) || descriptors instanceof PickleTuple
            ? (Array.isArray(descriptors) ? descriptors : descriptors.items).map(String)
            : [],
      };
      if (!Number.isSafeInteger(info.offset + info.length))
        invalid(`storage of ${truncateForMessage(fqn)} ends past 2^53`);
      storageByKey.set(`${fqn}\u0000${chunkOffsets?.join(",") ?? ""}`, info);
      storage.push({ ...info, fqn, chunkOffsets });
    }
  }

  const tensors: DcpTensor[] = [];
  const bytesEntries: DcpBytesEntry[] = [];
  let totalChunks = 0;
  for (const [fqn, value] of sdm.map) {
    if (typeof fqn !== "string") return invalid("a state_dict_metadata key is not a string");
    if (isA(value, "BytesStorageMetadata")) {
      bytesEntries.push({ fqn, storage: storageByKey.get(`${fqn}\u0000`) });
      continue;
    }
    if (!isA(value, "TensorStorageMetadata"))
      return invalid(`entry ${truncateForMessage(fqn)} is neither tensor nor bytes metadata`);
    const properties = field(value, "properties");
    let dtypeGlobal: unknown;
    if (isA(properties, "TensorProperties")) {
      const state = properties.state;
      // Current torch pickles TensorProperties as a tuple (dtype, layout, requires_grad, memory format, pin_memory).
      dtypeGlobal = state instanceof PickleTuple ? state.items[0] : field(properties, "dtype");
    }
    if (!(dtypeGlobal instanceof PickleGlobal))
      return invalid(`tensor ${truncateForMessage(fqn)} has no dtype`);
    const chunksValue = field(value, "chunks");
    if (!Array.isArray(chunksValue)) return invalid(`tensor ${truncateForMessage(fqn)} has no chunk list`);
    totalChunks += chunksValue.length;
    if (chunksValue.length > MAX_DCP_CHUNKS_PER_TENSOR || totalChunks > MAX_DCP_CHUNKS) {
      throw new TensorsError(
        "DCP_CHUNKS_TOO_MANY",
        `read DCP metadata ${file}: tensor ${truncateForMessage(fqn)} has ${chunksValue.length} chunks (${totalChunks} so far); max ${MAX_DCP_CHUNKS_PER_TENSOR} per tensor and ${MAX_DCP_CHUNKS} in all`,
        { kind: "input", file },
      );
    }
    const shape = ints(field(value, "size"), `size of ${fqn}`);
    if (!Number.isSafeInteger(shape.reduce((a, d) => a * d, 1)))
      invalid(`tensor ${truncateForMessage(fqn)} of shape [${shape}] has more than 2^53 elements`);
    const chunks = chunksValue.map((chunk): DcpChunk => {
      if (!isA(chunk, "ChunkStorageMetadata"))
        return invalid(`a chunk of ${truncateForMessage(fqn)} is not ChunkStorageMetadata`);
      const offsets = ints(field(chunk, "offsets"), `chunk offsets of ${fqn}`);
      const sizes = ints(field(chunk, "sizes"), `chunk sizes of ${fqn}`);
      if (
        offsets.length !== shape.length ||
        sizes.length !== shape.length ||
        offsets.some((o, d) => o + sizes[d]! > shape[d]!)
      ) {
        invalid(
          `chunk [${offsets}] of size [${sizes}] of ${truncateForMessage(fqn)} lies outside its shape [${shape}]`,
        );
      }
      return { offsets, sizes, storage: storageByKey.get(`${fqn}\u0000${offsets.join(",")}`) };
    });
    tensors.push({
      fqn,
      dtype: TORCH_DTYPE_NAMES[dtypeGlobal.name],
      torchDtype: dtypeGlobal.name,
      shape,
      chunks,
    });
  }

  const required = new Map<string, number>();
  for (const s of storage)
    required.set(s.relativePath, Math.max(required.get(s.relativePath) ?? 0, s.offset + s.length));
  const version = field(root, "version");
  return {
    file,
    tensors,
    bytes: bytesEntries,
    storage,
    files: [...required].map(([relativePath, requiredLength]) => ({ relativePath, requiredLength })),
    version: typeof version === "string" ? version : undefined,
    plannerData: plannerDataOf(field(root, "planner_data")),
  };
}

/** DefaultSavePlanner's fqn -> path mapping; any other planner data (custom planners) reads as empty. */
function plannerDataOf(value: unknown): Record<string, (string | number)[]> {
  const out: Record<string, (string | number)[]> = {};
  if (!(value instanceof PickleDict)) return out;
  for (const [fqn, path] of value.map) {
    const parts = path instanceof PickleTuple ? path.items : Array.isArray(path) ? path : undefined;
    if (typeof fqn !== "string" || !parts?.every((p) => typeof p === "string" || typeof p === "number"))
      continue;
    out[fqn] = parts as (string | number)[];
  }
  return out;
}

function checkRelativePath(path: string, file: string): void {
  const parts = path.split("/");
  if (
    path === "" ||
    path.startsWith("/") ||
    path.includes("\\") ||
    path.includes("\0") ||
    path.includes("://") ||
    parts.some((p) => p === ".." || p === "." || p === "")
  ) {
    throw new TensorsError(
      "DCP_PATH_UNSAFE",
      `read DCP metadata ${file}: storage path ${truncateForMessage(path)} is not a safe relative path`,
      { kind: "input", file },
    );
  }
}

/** Reads `<dir>/.metadata` of a torch.distributed.checkpoint directory. */
export async function readDcpMetadata(dir: string): Promise<DcpMetadata> {
  const path = join(dir, DCP_METADATA_FILE);
  // The guarded open: a FIFO or device under the name is refused, never waited on or read unbounded.
  const read = await readRegularFile(path, { maxBytes: MAX_PICKLE_BYTES });
  if (!read.ok) {
    const code =
      read.reason === "missing"
        ? "DCP_METADATA_MISSING"
        : read.reason === "too-large"
          ? "PICKLE_TOO_LARGE"
          : "DCP_METADATA_INVALID";
    const kind = read.reason === "unreadable" ? "failed" : "input";
    throw new TensorsError(
      code,
      `read DCP metadata ${path}: ${describeRefusal(read)}. It is the regular file torch.distributed.checkpoint writes last; restore it or use another checkpoint.`,
      {
        kind,
        file: path,
        ...("cause" in read ? { cause: read.cause } : {}),
      },
    );
  }
  return parseDcpMetadata(read.bytes, path);
}
