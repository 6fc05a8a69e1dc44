import { type DType, dtypeSize } from "../../dtypes.js";
import { truncateForMessage } from "../text.js";
import { TorchStorageRef, TorchTensor } from "../torch-tensor.js";
import { STORAGE_CLASS_DTYPES, TORCH_DTYPE_NAMES } from "../torch-types.js";
import { type AllowList, type GlobalHandler, type Refuse, VALUE } from "./allow-list.js";
import { PickleDict, PickleFloat, PickleGlobal, PickleObject, PickleTuple } from "./values.js";

/** Dimensions of one tensor: torch itself caps at 64 (c10 SmallVector sizes, MAX_DIMS in TensorIterator is 25). */
const MAX_TENSOR_DIMS = 64;

function isIndex(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function intTuple(value: unknown, label: string, fail: Refuse): number[] {
  if (!(value instanceof PickleTuple)) return fail("TORCH_BAD_TENSOR", `${label} is not a tuple`);
  if (value.items.length > MAX_TENSOR_DIMS) {
    return fail("TORCH_BAD_TENSOR", `${label} has ${value.items.length} dimensions; max ${MAX_TENSOR_DIMS}`);
  }
  return value.items.map((item) => {
    if (typeof item === "number" && Number.isSafeInteger(item) && item < 0 && label === "stride") {
      return fail("TORCH_NEGATIVE_STRIDE", `stride ${item} is negative`);
    }
    if (!isIndex(item)) {
      const kind = item instanceof PickleFloat ? " (a float)" : "";
      return fail(
        "TORCH_BAD_TENSOR",
        `${label} holds ${truncateForMessage(String(item))}${kind}; sizes are integers`,
      );
    }
    return item;
  });
}

/** `_rebuild_tensor[_v2](storage, offset, size, stride, requires_grad, ...)`: a view that must lie inside its storage. */
function rebuildTensor(args: readonly unknown[], _global: PickleGlobal, fail: Refuse): TorchTensor {
  if (args.length < 4) return fail("TORCH_BAD_TENSOR", `_rebuild_tensor_v2 with ${args.length} arguments`);
  const [storage, offset, sizeArg, strideArg, requiresGrad] = args;
  if (!(storage instanceof TorchStorageRef))
    return fail("TORCH_BAD_TENSOR", "tensor storage is not a persistent storage");
  if (!isIndex(offset)) {
    return fail(
      "TORCH_BAD_TENSOR",
      `storage offset ${truncateForMessage(String(offset))}${offset instanceof PickleFloat ? " (a float)" : ""} is not a non-negative integer`,
    );
  }
  const shape = intTuple(sizeArg, "size", fail);
  const stride = intTuple(strideArg, "stride", fail);
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
}

/** `_rebuild_parameter[_with_state](data, requires_grad, ...)`: the tensor, marked as a parameter. */
function rebuildParameter(args: readonly unknown[], _global: PickleGlobal, fail: Refuse): TorchTensor {
  const [data, requiresGrad] = args;
  if (!(data instanceof TorchTensor)) return fail("TORCH_BAD_TENSOR", "_rebuild_parameter of a non-tensor");
  return new TorchTensor(
    data.storage,
    data.storageOffset,
    data.shape,
    data.stride,
    requiresGrad === true,
    true,
  );
}

/** The sparse layouts torch.save writes, and the names of their component tensors in order. */
const SPARSE_COMPONENTS: Readonly<Record<string, readonly string[]>> = {
  sparse_coo: ["indices", "values"],
  sparse_csr: ["crow_indices", "col_indices", "values"],
  sparse_csc: ["ccol_indices", "row_indices", "values"],
  sparse_bsr: ["crow_indices", "col_indices", "values"],
  sparse_bsc: ["ccol_indices", "row_indices", "values"],
};

/** `torch.serialization._get_layout("torch.sparse_coo")`: a lookup in a fixed table, answered here. */
const GET_LAYOUT: GlobalHandler = {
  call: (args, _global, fail) => {
    const [name] = args;
    const layout = typeof name === "string" && name.startsWith("torch.") ? name.slice("torch.".length) : "";
    return args.length === 1 && Object.hasOwn(SPARSE_COMPONENTS, layout)
      ? new PickleGlobal("torch", layout)
      : fail("PICKLE_CALL_REFUSED", `_get_layout of ${truncateForMessage(String(name))}`);
  },
};

/**
 * `_rebuild_sparse_tensor(layout, (indices..., values, size[, coalesced]))`: a sparse tensor is
 * its dense component tensors, so it reads as a dict of them (`w.indices`, `w.values`).
 */
function rebuildSparse(args: readonly unknown[], _global: PickleGlobal, fail: Refuse): PickleDict {
  const [layout, data] = args;
  const names = layout instanceof PickleGlobal ? SPARSE_COMPONENTS[layout.name] : undefined;
  if (!names || !(data instanceof PickleTuple) || data.items.length < names.length + 1) {
    return fail("TORCH_BAD_TENSOR", "_rebuild_sparse_tensor without a sparse layout and its tensors");
  }
  const components = new PickleDict(false);
  names.forEach((name, i) => {
    const tensor = data.items[i];
    if (!(tensor instanceof TorchTensor)) fail("TORCH_BAD_TENSOR", `sparse ${name} is not a tensor`);
    components.map.set(name, tensor);
  });
  intTuple(data.items[names.length], "size", fail);
  return components;
}

/** `_rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad)`: a tensor with no data, never listed. */
function rebuildMeta(args: readonly unknown[], global: PickleGlobal, fail: Refuse): PickleObject {
  const [dtype, size, stride] = args;
  if (!(dtype instanceof PickleGlobal) || storageDtype(dtype) === undefined) {
    return fail("TORCH_BAD_TENSOR", "meta tensor without a dtype");
  }
  intTuple(size, "size", fail);
  intTuple(stride, "stride", fail);
  return new PickleObject(global, args);
}

/** `collections.OrderedDict()`: an empty ordered dict (SETITEMS fills it). */
const ORDERED_DICT: GlobalHandler = {
  call: (args, _global, fail) =>
    args.length === 0
      ? new PickleDict(true)
      : fail("PICKLE_CALL_REFUSED", "OrderedDict called with arguments"),
};

/** `torch.Size((d0, d1, ...))`: the tuple itself. */
const TORCH_SIZE: GlobalHandler = {
  call: (args, _global, fail) =>
    args.length === 1 && args[0] instanceof PickleTuple
      ? args[0]
      : fail("PICKLE_CALL_REFUSED", "torch.Size called without one tuple"),
};

/** The storage element type a storage class or dtype global names, if any. */
export function storageDtype(global: PickleGlobal): DType | undefined {
  if (global.module === "torch" && Object.hasOwn(STORAGE_CLASS_DTYPES, global.name)) {
    return STORAGE_CLASS_DTYPES[global.name];
  }
  if (global.module === "torch" && Object.hasOwn(TORCH_DTYPE_NAMES, global.name))
    return TORCH_DTYPE_NAMES[global.name];
  if (global.name === "UntypedStorage" && (global.module === "torch" || global.module === "torch.storage"))
    return "U8";
  return undefined;
}

/**
 * The torch.save (`data.pkl`) allow-list, as torch.load(weights_only=True) has it: plain
 * containers, tensor and parameter rebuild functions, storage types and dtypes. Nothing else.
 */
export const TORCH_GLOBALS: AllowList = new Map<string, GlobalHandler>([
  ["collections.OrderedDict", ORDERED_DICT],
  ["torch.Size", TORCH_SIZE],
  [
    "_codecs.encode",
    {
      // protocol-2 pickles write bytes as _codecs.encode(text, "latin1")
      call: (args, _global, fail) => {
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
      },
    },
  ],
  ["torch._utils._rebuild_tensor_v2", { call: rebuildTensor }],
  ["torch._utils._rebuild_tensor", { call: rebuildTensor }],
  ["torch._utils._rebuild_parameter", { call: rebuildParameter }],
  ["torch._utils._rebuild_parameter_with_state", { call: rebuildParameter }],
  ["torch._utils._rebuild_sparse_tensor", { call: rebuildSparse }],
  ["torch._utils._rebuild_meta_tensor_no_storage", { call: rebuildMeta }],
  ["torch.serialization._get_layout", GET_LAYOUT],
  // Storage types and dtypes are named by persistent ids; they are values, never called.
  ...Object.keys(STORAGE_CLASS_DTYPES).map((name) => [`torch.${name}`, VALUE] as const),
  ...Object.keys(TORCH_DTYPE_NAMES).map((name) => [`torch.${name}`, VALUE] as const),
  ["torch.UntypedStorage", VALUE],
  ["torch.storage.UntypedStorage", VALUE],
]);
