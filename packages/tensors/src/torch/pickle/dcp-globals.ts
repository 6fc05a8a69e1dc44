import { truncateForMessage } from "../text.js";
import { TORCH_DTYPE_NAMES } from "../torch-types.js";
import { type AllowList, type GlobalHandler, type Refuse, VALUE } from "./allow-list.js";
import { PickleDict, PickleGlobal, PickleObject, PickleTuple } from "./values.js";

const METADATA_MODULE = "torch.distributed.checkpoint.metadata";
const FILESYSTEM_MODULE = "torch.distributed.checkpoint.filesystem";
/** torch 1.13 kept DCP under torch.distributed._shard, its TensorProperties with ShardedTensor's metadata. */
const LEGACY_METADATA_MODULE = "torch.distributed._shard.checkpoint.metadata";
const LEGACY_FILESYSTEM_MODULE = "torch.distributed._shard.checkpoint.filesystem";
const LEGACY_SHARDED_TENSOR_MODULE = "torch.distributed._shard.sharded_tensor.metadata";
/** The memory-format enum TensorProperties pickles, in torch 2 and in torch 1.13. */
const MEM_FORMAT_ENCODINGS = new Set([
  `${METADATA_MODULE}._MEM_FORMAT_ENCODING`,
  `${LEGACY_SHARDED_TENSOR_MODULE}.MEM_FORMAT_ENCODING`,
]);

/** Dataclasses DCP pickles with NEWOBJ + BUILD; their state is their field dict. */
const DATACLASSES = [
  `${METADATA_MODULE}.Metadata`,
  `${METADATA_MODULE}.TensorStorageMetadata`,
  `${METADATA_MODULE}.ChunkStorageMetadata`,
  `${METADATA_MODULE}.BytesStorageMetadata`,
  `${METADATA_MODULE}.TensorProperties`,
  `${METADATA_MODULE}.MetadataIndex`,
  `${METADATA_MODULE}.StorageMeta`,
  `${FILESYSTEM_MODULE}._StorageInfo`,
  `${LEGACY_METADATA_MODULE}.Metadata`,
  `${LEGACY_METADATA_MODULE}.TensorStorageMetadata`,
  `${LEGACY_METADATA_MODULE}.ChunkStorageMetadata`,
  `${LEGACY_METADATA_MODULE}.BytesStorageMetadata`,
  `${LEGACY_METADATA_MODULE}.MetadataIndex`,
  `${LEGACY_SHARDED_TENSOR_MODULE}.TensorProperties`,
  `${LEGACY_FILESYSTEM_MODULE}._StorageInfo`,
];
/** Constants that appear as values (layouts, memory formats); never called. */
const TORCH_CONSTANTS = new Set([
  "strided",
  "sparse_coo",
  "contiguous_format",
  "channels_last",
  "preserve_format",
]);
/** torch's complex dtypes (no ckpt dtype: DCP metadata names them, ckpt reads no complex data). */
const TORCH_COMPLEX_DTYPES = ["complex32", "complex64", "complex128"];

/** Members of the memory-format enum (TensorProperties state). */
const MEMORY_FORMAT_MEMBERS = new Set([
  "TORCH_CONTIGUOUS_FORMAT",
  "TORCH_CHANNELS_LAST",
  "TORCH_PRESERVE_FORMAT",
]);

const DATACLASS: GlobalHandler = { newObject: (args, cls) => new PickleObject(cls, args) };

/** Python 3.11+ pickles an Enum member as getattr(EnumClass, "NAME"): allowed for the memory-format enum's members only. */
const GETATTR: GlobalHandler = {
  call: (args, _global, fail) => {
    const [cls, member] = args;
    if (
      args.length === 2 &&
      cls instanceof PickleGlobal &&
      MEM_FORMAT_ENCODINGS.has(cls.qualifiedName) &&
      typeof member === "string" &&
      MEMORY_FORMAT_MEMBERS.has(member)
    ) {
      return new PickleObject(cls, [member]);
    }
    return fail("PICKLE_CALL_REFUSED", "getattr is allowed only for the memory-format enum's members");
  },
};

/** DCP's refusal of a call its entry does not accept. */
function refuseCall(global: PickleGlobal, fail: Refuse): never {
  return fail("PICKLE_CALL_REFUSED", `${truncateForMessage(global.qualifiedName)} cannot be called this way`);
}

/** A call answered when `accepts` holds for its arguments, refused otherwise. */
function callWhen(
  accepts: (args: readonly unknown[]) => boolean,
  answer: (args: readonly unknown[], global: PickleGlobal) => unknown,
): GlobalHandler {
  return { call: (args, global, fail) => (accepts(args) ? answer(args, global) : refuseCall(global, fail)) };
}

/** A path of string parts, as `str(PurePosixPath(*parts))`. */
const POSIX_PATH = callWhen(
  (args) => args.every((a) => typeof a === "string"),
  (args) => (args[0] === "/" ? `/${args.slice(1).join("/")}` : args.join("/")),
);

const layoutName = (arg: unknown) => (typeof arg === "string" ? arg.replace(/^torch\./, "") : undefined);

/**
 * The DCP `.metadata` allow-list (torch 2's torch.distributed.checkpoint and torch 1.13's
 * torch.distributed._shard.checkpoint): its dataclasses (NEWOBJ + BUILD), the memory-format enum, plain
 * containers, layouts via `_get_layout`, POSIX paths, dtypes and torch constants. Nothing else.
 */
export const DCP_GLOBALS: AllowList = new Map<string, GlobalHandler>([
  ...DATACLASSES.map((name) => [name, DATACLASS] as const),
  ...[...MEM_FORMAT_ENCODINGS].map(
    (name) =>
      [
        name,
        callWhen(
          (args) => args.length === 1,
          (args, global) => new PickleObject(global, args),
        ),
      ] as const,
  ),
  ["builtins.getattr", GETATTR],
  ["__builtin__.getattr", GETATTR],
  [
    "collections.OrderedDict",
    callWhen(
      (args) => args.length === 0,
      () => new PickleDict(true),
    ),
  ],
  [
    "torch.Size",
    callWhen(
      (args) => args.length === 1 && args[0] instanceof PickleTuple,
      (args) => args[0],
    ),
  ],
  [
    "_codecs.encode",
    callWhen(
      (args) => typeof args[0] === "string" && (args[1] === "latin1" || args[1] === "latin-1"),
      (args) => Uint8Array.from(args[0] as string, (c) => c.charCodeAt(0) & 0xff),
    ),
  ],
  [
    // torch pickles a layout as _get_layout("torch.strided"): a lookup in a fixed table, answered here.
    "torch.serialization._get_layout",
    callWhen(
      (args) => args.length === 1 && TORCH_CONSTANTS.has(layoutName(args[0]) ?? ""),
      (args) => new PickleGlobal("torch", layoutName(args[0])!),
    ),
  ],
  ["pathlib.PosixPath", POSIX_PATH],
  ["pathlib.PurePosixPath", POSIX_PATH],
  ...[...Object.keys(TORCH_DTYPE_NAMES), ...TORCH_CONSTANTS, ...TORCH_COMPLEX_DTYPES].map(
    (name) => [`torch.${name}`, VALUE] as const,
  ),
]);
