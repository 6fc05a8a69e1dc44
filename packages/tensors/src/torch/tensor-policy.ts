import { type DType, dtypeSize } from "../dtypes.js";
import { TensorsError, type TensorsErrorCode } from "../errors.js";
import { refuseGlobal, type UnpicklePolicy } from "./pickle/unpickler.js";
import { PickleDict, PickleGlobal, PickleTuple } from "./pickle/values.js";
import { truncateForMessage } from "./text.js";
import { STORAGE_CLASS_DTYPES, TORCH_DTYPE_NAMES } from "./torch-types.js";

/** Dimensions of one tensor: torch itself caps at 64 (c10 SmallVector sizes, MAX_DIMS in TensorIterator is 25). */
export const MAX_TENSOR_DIMS = 64;
/** Storage keys are decimal counters in torch.save; longer or path-like keys are refused. */
export const MAX_STORAGE_KEY_CHARS = 128;
const STORAGE_KEY = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

/** One storage as the pickle references it: the member `<prefix>/data/<key>` read as `dtype`. */
export class TorchStorageRef {
  constructor(
    readonly key: string,
    readonly dtype: DType,
    /** Elements the pickle says the storage holds (the whole storage, not one tensor). */
    readonly numel: number,
  ) {}
}

/** A tensor in the unpickled tree: where its elements live, never the elements themselves. */
export class TorchTensor {
  constructor(
    readonly storage: TorchStorageRef,
    /** In elements. */
    readonly storageOffset: number,
    readonly shape: readonly number[],
    /** In elements. */
    readonly stride: readonly number[],
    readonly requiresGrad: boolean,
    readonly isParameter: boolean,
  ) {}
  get dtype(): DType {
    return this.storage.dtype;
  }
  get numel(): number {
    return this.shape.reduce((a, b) => a * b, 1);
  }
  /** True when the elements are one dense run in row-major order. */
  get contiguous(): boolean {
    let expected = 1;
    for (let d = this.shape.length - 1; d >= 0; d--) {
      const size = this.shape[d]!;
      if (size !== 1 && this.stride[d] !== expected) return this.numel === 0;
      expected *= size;
    }
    return true;
  }
}

const TENSOR_FUNCTIONS = new Set([
  "torch._utils._rebuild_tensor_v2",
  "torch._utils._rebuild_tensor",
  "torch._utils._rebuild_parameter",
  "torch._utils._rebuild_parameter_with_state",
]);

function storageDtype(global: PickleGlobal): DType | undefined {
  if (global.module === "torch" && Object.hasOwn(STORAGE_CLASS_DTYPES, global.name)) {
    return STORAGE_CLASS_DTYPES[global.name];
  }
  if (global.module === "torch" && Object.hasOwn(TORCH_DTYPE_NAMES, global.name))
    return TORCH_DTYPE_NAMES[global.name];
  if (global.name === "UntypedStorage" && (global.module === "torch" || global.module === "torch.storage"))
    return "U8";
  return undefined;
}

/** Is this global one the torch policy knows (so any other name is refused by name)? */
function isTorchGlobal(module: string, name: string): boolean {
  const qualified = `${module}.${name}`;
  return (
    TENSOR_FUNCTIONS.has(qualified) ||
    qualified === "collections.OrderedDict" ||
    qualified === "torch.Size" ||
    qualified === "_codecs.encode" ||
    storageDtype(new PickleGlobal(module, name)) !== undefined
  );
}

function isIndex(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** The torch.save allow-list: plain containers, tensor rebuild functions, storage types. Nothing else. */
export function torchPolicy(file: string): UnpicklePolicy {
  const what = "data.pkl";
  const storages = new Map<string, TorchStorageRef>();
  const fail = (code: TensorsErrorCode, message: string): never => {
    throw new TensorsError(code, `unpickle ${what} of ${file}: ${message}`, { kind: "input", file });
  };
  const intTuple = (value: unknown, label: string): number[] => {
    if (!(value instanceof PickleTuple)) return fail("TORCH_BAD_TENSOR", `${label} is not a tuple`);
    if (value.items.length > MAX_TENSOR_DIMS) {
      return fail(
        "TORCH_BAD_TENSOR",
        `${label} has ${value.items.length} dimensions; max ${MAX_TENSOR_DIMS}`,
      );
    }
    return value.items.map((item) => {
      if (typeof item === "number" && Number.isSafeInteger(item) && item < 0 && label === "stride") {
        return fail("TORCH_NEGATIVE_STRIDE", `stride ${item} is negative`);
      }
      if (!isIndex(item))
        return fail("TORCH_BAD_TENSOR", `${label} holds ${truncateForMessage(String(item))}`);
      return item;
    });
  };
  const rebuildTensor = (args: readonly unknown[]): TorchTensor => {
    if (args.length < 4) return fail("TORCH_BAD_TENSOR", `_rebuild_tensor_v2 with ${args.length} arguments`);
    const [storage, offset, sizeArg, strideArg, requiresGrad] = args;
    if (!(storage instanceof TorchStorageRef))
      return fail("TORCH_BAD_TENSOR", "tensor storage is not a persistent storage");
    if (!isIndex(offset)) return fail("TORCH_BAD_TENSOR", "storage offset is not a non-negative integer");
    const shape = intTuple(sizeArg, "size");
    const stride = intTuple(strideArg, "stride");
    if (shape.length !== stride.length) {
      return fail("TORCH_BAD_TENSOR", `size has ${shape.length} dimensions and stride ${stride.length}`);
    }
    let numel = 1;
    let last = offset;
    for (let d = 0; d < shape.length; d++) {
      numel *= shape[d]!;
      last += (shape[d]! - 1) * stride[d]!;
    }
    if (
      !Number.isSafeInteger(numel) ||
      !Number.isSafeInteger(last) ||
      numel * dtypeSize(storage.dtype) > Number.MAX_SAFE_INTEGER
    ) {
      return fail("TORCH_BAD_TENSOR", "tensor extent is past 2^53");
    }
    if (numel > 0 ? last >= storage.numel : offset > storage.numel) {
      return fail(
        "TORCH_TENSOR_OUT_OF_STORAGE",
        `tensor of shape [${shape}] stride [${stride}] at offset ${offset} needs more than the ${storage.numel} elements of storage ${truncateForMessage(storage.key)}`,
      );
    }
    return new TorchTensor(storage, offset, shape, stride, requiresGrad === true, false);
  };
  return {
    resolveGlobal(module, name) {
      if (!isTorchGlobal(module, name)) refuseGlobal(module, name, file, what);
      return new PickleGlobal(module, name);
    },
    call(callable, args) {
      switch (callable.qualifiedName) {
        case "collections.OrderedDict": {
          const dict = new PickleDict(true);
          if (args.length === 0) return dict;
          return fail("PICKLE_CALL_REFUSED", "OrderedDict called with arguments");
        }
        case "torch.Size": {
          if (args.length === 1 && args[0] instanceof PickleTuple) return args[0];
          return fail("PICKLE_CALL_REFUSED", "torch.Size called without one tuple");
        }
        case "_codecs.encode": {
          const [text, encoding] = args;
          if (typeof text !== "string" || (encoding !== "latin1" && encoding !== "latin-1")) {
            return fail("PICKLE_CALL_REFUSED", "_codecs.encode is allowed only for latin1 text");
          }
          const out = new Uint8Array(text.length);
          for (let i = 0; i < text.length; i++) {
            const code = text.charCodeAt(i);
            if (code > 0xff) return fail("PICKLE_CALL_REFUSED", "_codecs.encode of non-latin1 text");
            out[i] = code;
          }
          return out;
        }
        case "torch._utils._rebuild_tensor_v2":
        case "torch._utils._rebuild_tensor":
          return rebuildTensor(args);
        case "torch._utils._rebuild_parameter":
        case "torch._utils._rebuild_parameter_with_state": {
          const [data, requiresGrad] = args;
          if (!(data instanceof TorchTensor))
            return fail("TORCH_BAD_TENSOR", "_rebuild_parameter of a non-tensor");
          return new TorchTensor(
            data.storage,
            data.storageOffset,
            data.shape,
            data.stride,
            requiresGrad === true,
            true,
          );
        }
        default:
          return fail(
            "PICKLE_CALL_REFUSED",
            `${truncateForMessage(callable.qualifiedName)} cannot be called`,
          );
      }
    },
    newObject(cls) {
      return fail(
        "PICKLE_CALL_REFUSED",
        `NEWOBJ of ${truncateForMessage(cls.qualifiedName)} is not allowed in torch files`,
      );
    },
    build(target, state) {
      if (!(target instanceof PickleDict)) fail("PICKLE_INVALID", "BUILD on something other than a dict");
      const dict = target as PickleDict;
      const parts = state instanceof PickleTuple && state.items.length === 2 ? state.items : [state];
      for (const part of parts) {
        if (part === null) continue;
        if (!(part instanceof PickleDict)) return fail("PICKLE_INVALID", "BUILD state is not a dict");
        for (const [key, value] of part.map) {
          if (typeof key !== "string") return fail("PICKLE_INVALID", "BUILD attribute name is not a string");
          dict.attributes.set(key, value);
        }
      }
    },
    persistentLoad(pid) {
      if (!(pid instanceof PickleTuple) || pid.items.length !== 5 || pid.items[0] !== "storage") {
        return fail(
          "TORCH_BAD_PERSISTENT_ID",
          "persistent id is not ('storage', type, key, location, numel)",
        );
      }
      const [, type, key, , numel] = pid.items;
      const dtype = type instanceof PickleGlobal ? storageDtype(type) : undefined;
      if (dtype === undefined) return fail("TORCH_BAD_PERSISTENT_ID", "persistent id names no storage type");
      if (
        typeof key !== "string" ||
        key.length > MAX_STORAGE_KEY_CHARS ||
        !STORAGE_KEY.test(key) ||
        /^\.+$/.test(key)
      ) {
        return fail(
          "TORCH_BAD_STORAGE_KEY",
          `storage key ${truncateForMessage(String(key))} is not a plain name`,
        );
      }
      if (!isIndex(numel) || numel * dtypeSize(dtype) > Number.MAX_SAFE_INTEGER) {
        return fail(
          "TORCH_BAD_PERSISTENT_ID",
          `storage ${truncateForMessage(key)} has element count ${truncateForMessage(String(numel))}`,
        );
      }
      const cacheKey = `${key}\u0000${dtype}\u0000${numel}`;
      let ref = storages.get(cacheKey);
      if (!ref) {
        ref = new TorchStorageRef(key, dtype, numel);
        storages.set(cacheKey, ref);
      }
      return ref;
    },
  };
}
