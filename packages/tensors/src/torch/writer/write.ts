import { randomBytes } from "node:crypto";
import { open, rename, unlink } from "node:fs/promises";
import { basename, extname } from "node:path";
import { type DType, dtypeSize, isDType } from "../../dtypes.js";
import { TensorsError, type TensorsErrorCode } from "../../errors.js";
import { PickleFloat } from "../pickle/values.js";
import { truncateForMessage } from "../text.js";
import { DTYPE_STORAGE_CLASSES } from "../torch-types.js";
import { Pickler } from "./pickler.js";
import { ZipStreamWriter } from "./zip-writer.js";

/** A tensor to write, described before its bytes exist. */
export interface TorchTensorDesc {
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/**
 * Values a written tree may hold: nested dicts, tensors, and a few plain scalars (step counters,
 * names). A number is written as a Python int when it is a safe integer, else as a float (`-0`
 * included); a JavaScript number cannot say `1.0`, so a float with an integral value is a
 * `PickleFloat` (as the reader returns it).
 */
export type TorchTreeValue = TorchTensorDesc | TorchTree | PickleFloat | string | number | boolean | null;
export interface TorchTree {
  readonly [key: string]: TorchTreeValue;
}

/** Bytes of one tensor: a whole buffer, or chunks (for tensors larger than one buffer should hold). */
export type TensorBytes = Uint8Array | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export interface WriteTorchFileOptions {
  /** Nested dicts; a dict whose values are all tensors is written as an OrderedDict (a state dict). */
  readonly tree: TorchTree;
  /** Called once per tensor, in tree order, as its member is written; `name` is the "."-joined path. */
  provideTensor(name: string, desc: TorchTensorDesc): TensorBytes | Promise<TensorBytes>;
  /** Archive folder; defaults to the file name without its last extension, as torch.save does. */
  readonly prefix?: string;
  /** fsync the file before the rename (default true); false for scratch output, as torch.save never syncs. */
  readonly sync?: boolean;
}

export interface WriteTorchFileResult {
  readonly path: string;
  readonly bytes: number;
  readonly tensors: number;
}

/** Deepest tree the writer walks (the reader's limit is larger, so what is written can be read). */
const MAX_WRITE_TREE_DEPTH = 128;

function isTensorDesc(value: TorchTreeValue): value is TorchTensorDesc {
  return typeof value === "object" && value !== null && Array.isArray((value as TorchTensorDesc).shape);
}

interface PlannedTensor {
  name: string;
  desc: TorchTensorDesc;
  key: string;
  byteLength: number;
}

function writeError(code: TensorsErrorCode, path: string, message: string, tensor?: string): TensorsError {
  return new TensorsError(code, `write torch file ${path}: ${message}`, {
    kind: "input",
    file: path,
    tensor,
  });
}

/** Builds data.pkl from descriptions only: one storage per tensor, keys "0", "1", ... in tree order. */
export function planTorchPickle(
  tree: TorchTree,
  path = "<memory>",
): { pickle: Uint8Array; tensors: PlannedTensor[] } {
  const p = new Pickler();
  const tensors: PlannedTensor[] = [];
  const writeValue = (value: TorchTreeValue, name: string, depth: number): void => {
    if (value === null) p.none();
    else if (typeof value === "string") p.string(value);
    else if (typeof value === "boolean") p.bool(value);
    else if (value instanceof PickleFloat) p.float(value.value);
    else if (typeof value === "number") {
      if (Number.isSafeInteger(value) && !Object.is(value, -0)) p.int(value);
      else p.float(value);
    } else if (isTensorDesc(value)) writeTensor(value, name);
    else writeNested(value, name, depth);
  };
  const writeNested = (value: TorchTree, name: string, depth: number): void => {
    if (depth >= MAX_WRITE_TREE_DEPTH)
      throw writeError("TORCH_WRITE_BAD_TREE", path, `tree deeper than ${MAX_WRITE_TREE_DEPTH}`);
    writeDict(value, name, depth + 1);
  };
  const writeTensor = (desc: TorchTensorDesc, name: string): void => {
    const storageClass = isDType(desc.dtype) ? DTYPE_STORAGE_CLASSES[desc.dtype] : undefined;
    if (storageClass === undefined) {
      throw writeError(
        "TORCH_WRITE_DTYPE_UNSUPPORTED",
        path,
        `dtype ${truncateForMessage(String(desc.dtype))} has no torch storage class`,
        name,
      );
    }
    if (!desc.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw writeError(
        "TORCH_WRITE_BAD_TREE",
        path,
        `shape [${desc.shape}] of ${truncateForMessage(name)} is not sizes`,
        name,
      );
    }
    const numel = desc.shape.reduce((a, b) => a * b, 1);
    const stride = desc.shape.map((_, d) => desc.shape.slice(d + 1).reduce((a, b) => a * b, 1));
    const key = String(tensors.length);
    tensors.push({ name, desc, key, byteLength: numel * dtypeSize(desc.dtype) });
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark();
    p.string("storage");
    p.global("torch", storageClass);
    p.string(key);
    p.string("cpu");
    p.int(numel);
    p.tuple();
    p.persistentId();
    p.int(0);
    p.intTuple(desc.shape);
    p.intTuple(stride);
    p.bool(false);
    p.global("collections", "OrderedDict");
    p.emptyTuple();
    p.reduce();
    p.tuple();
    p.reduce();
  };
  const writeDict = (dict: TorchTree, prefix: string, depth: number): void => {
    const entries = Object.entries(dict);
    const stateDict = entries.length > 0 && entries.every(([, v]) => isTensorDesc(v));
    if (stateDict) {
      p.global("collections", "OrderedDict");
      p.emptyTuple();
      p.reduce();
    } else {
      p.emptyDict();
    }
    // SETITEMS in batches of 1000, as pickle does, so readers' stacks stay small.
    for (let start = 0; start < entries.length; start += 1000) {
      p.mark();
      for (const [key, value] of entries.slice(start, start + 1000)) {
        p.string(key);
        writeValue(value, prefix === "" ? key : `${prefix}.${key}`, depth);
      }
      p.setItems();
    }
  };
  writeDict(tree, "", 0);
  return { pickle: p.stop(), tensors };
}

async function* asChunks(bytes: TensorBytes): AsyncIterable<Uint8Array> {
  if (bytes instanceof Uint8Array) {
    yield bytes;
    return;
  }
  yield* bytes;
}

/**
 * Writes a torch.save-compatible zip (loads with `torch.load`, also `weights_only=True`), one tensor
 * at a time: the pickle is built from descriptions, then each tensor's bytes are asked for and
 * streamed into its member. Writes to a temporary next to `path` and renames it on success.
 */
export async function writeTorchFile(
  path: string,
  options: WriteTorchFileOptions,
): Promise<WriteTorchFileResult> {
  const prefix = options.prefix ?? basename(path, extname(path));
  if (prefix === "" || prefix.includes("/") || prefix.includes("\\") || prefix === "." || prefix === "..") {
    throw writeError(
      "TORCH_WRITE_BAD_PREFIX",
      path,
      `archive folder ${truncateForMessage(prefix)} is not one path component`,
    );
  }
  const { pickle, tensors } = planTorchPickle(options.tree, path);
  const temp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  const handle = await open(temp, "wx");
  try {
    const zip = new ZipStreamWriter(handle);
    await zip.addMember(`${prefix}/data.pkl`, pickle.length, [pickle]);
    await zip.addMember(`${prefix}/byteorder`, 6, [Buffer.from("little")]);
    for (const tensor of tensors) {
      const bytes = await options.provideTensor(tensor.name, tensor.desc);
      const written = await zip.addMember(`${prefix}/data/${tensor.key}`, tensor.byteLength, asChunks(bytes));
      if (written !== tensor.byteLength) {
        throw writeError(
          "TORCH_WRITE_SIZE_MISMATCH",
          path,
          `tensor ${truncateForMessage(tensor.name)} (${tensor.desc.dtype} [${tensor.desc.shape}]) needs ${tensor.byteLength} bytes; the provider gave ${written > tensor.byteLength ? "more" : written}`,
          tensor.name,
        );
      }
    }
    await zip.addMember(`${prefix}/version`, 2, [Buffer.from("3\n")]);
    await zip.finish();
    if (options.sync !== false) await handle.sync();
    const { size } = await handle.stat();
    await handle.close();
    await rename(temp, path);
    return { path, bytes: size, tensors: tensors.length };
  } catch (error) {
    await handle.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    throw error;
  }
}
