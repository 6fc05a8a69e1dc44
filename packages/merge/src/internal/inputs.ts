import { stat } from "node:fs/promises";
import { join } from "node:path";
import { type ByteSource, openFileByteSource } from "@ckpt/manifest";
import {
  HF_INDEX_FILE,
  type HfTensorInfo,
  openHfDirectory,
  openSafetensors,
  openTorchFile,
  PickleDict,
  TensorsError,
  TorchTensor,
  type TorchTensorEntry,
} from "@ckpt/tensors";
import { MergeError } from "../errors.js";
import type { InputListing } from "../plan.js";

/** The key a consolidated expert keeps its state dict under: `torch.save({"net": state_dict})`. */
export const EXPERT_STATE_KEY = "net";
const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04];

/** An opened input (an expert file or the base directory): its header listing and piecewise reads. */
export interface TensorInput {
  readonly file: string;
  readonly listing: InputListing;
  /** `length` bytes of tensor `name` starting `start` bytes in, into `into`. */
  readRange(name: string, start: number, length: number, into: Uint8Array): Promise<Uint8Array>;
  /** The files whose bytes this input stands for (hashed for the request identity). */
  readonly files: readonly string[];
  /** Identity of each file when opened, to detect a replacement while the merge reads it. */
  readonly opened: readonly FileStamp[];
  close(): Promise<void>;
}

export interface FileStamp {
  readonly path: string;
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
}

export async function stampOf(path: string): Promise<FileStamp> {
  const s = await stat(path);
  return { path, dev: s.dev, ino: s.ino, size: s.size, mtimeMs: s.mtimeMs };
}

function unreadable(file: string, error: unknown, what: string): MergeError {
  if (error instanceof MergeError) return error;
  const code = (error as { code?: unknown }).code;
  const reason =
    code === "ENOENT"
      ? "no such file or directory"
      : error instanceof TensorsError
        ? `${error.message} (${error.code})`
        : error instanceof Error
          ? error.message
          : String(error);
  return new MergeError(
    "MERGE_INPUT_UNREADABLE",
    `merge: cannot read ${what} ${file}: ${reason}. Check the path and that it is ${what === "the base" ? "a Hugging Face directory with safetensors weights" : "a torch.save or safetensors model file"}.`,
    { kind: "input", file, cause: error },
  );
}

async function openSource(path: string, what: string): Promise<ByteSource> {
  try {
    return await openFileByteSource(path);
  } catch (error) {
    throw unreadable(path, error, what);
  }
}

/** Piecewise reads of strided torch tensors: the whole tensor once, then slices (rare in state dicts). */
function stridedCache(read: (entry: TorchTensorEntry) => Promise<Uint8Array>) {
  let cached: { entry: TorchTensorEntry; bytes: Promise<Uint8Array> } | undefined;
  return (entry: TorchTensorEntry): Promise<Uint8Array> => {
    if (cached?.entry !== entry) cached = { entry, bytes: read(entry) };
    return cached.bytes;
  };
}

async function openTorchExpert(path: string, source: ByteSource): Promise<TensorInput> {
  const file = await openTorchFile(source);
  const root = file.root;
  const net = root instanceof PickleDict ? root.map.get(EXPERT_STATE_KEY) : undefined;
  const layoutError = (detail: string) =>
    new MergeError(
      "MERGE_EXPERT_LAYOUT",
      `merge: expert ${path} ${detail}. Experts are consolidated torch.save({"net": state_dict}) files with Hugging Face key names.`,
      { kind: "input", file: path },
    );
  if (!(net instanceof PickleDict))
    throw layoutError(`has no "${EXPERT_STATE_KEY}" state dict at its top level`);
  for (const [key, value] of net.map) {
    if (!(value instanceof TorchTensor)) {
      throw layoutError(`holds a non-tensor value under "${EXPERT_STATE_KEY}" (key ${String(key)})`);
    }
  }
  const prefix = `${EXPERT_STATE_KEY}.`;
  const outside = file.tensors.find((t) => !t.name.startsWith(prefix));
  if (outside !== undefined) throw layoutError(`holds tensor ${outside.name} outside "${EXPERT_STATE_KEY}"`);
  const byName = new Map(file.tensors.map((t) => [t.name.slice(prefix.length), t]));
  const whole = stridedCache((entry) => file.readTensor(entry));
  return {
    file: path,
    listing: {
      file: path,
      tensors: [...byName].map(([name, t]) => ({ name, dtype: t.dtype, shape: t.shape })),
    },
    async readRange(name, start, length, into) {
      const entry = byName.get(name)!;
      if (entry.contiguous) return file.readTensorRange(entry, start, length, into);
      const bytes = await whole(entry);
      into.set(bytes.subarray(start, start + length));
      return into.subarray(0, length);
    },
    files: [path],
    opened: [await stampOf(path)],
    close: () => file.close(),
  };
}

async function openSafetensorsExpert(path: string, source: ByteSource): Promise<TensorInput> {
  const file = await openSafetensors(source);
  return {
    file: path,
    listing: {
      file: path,
      tensors: file.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
    },
    readRange(name, start, length, into) {
      return source.read(file.tensor(name)!.dataOffset + start, length, into);
    },
    files: [path],
    opened: [await stampOf(path)],
    close: () => source.close(),
  };
}

/** Opens an expert: a torch.save zip (`{"net": state_dict}`) or a safetensors file, told apart by content. */
export async function openExpert(path: string): Promise<TensorInput> {
  const source = await openSource(path, "expert");
  try {
    const head = await source.read(0, Math.min(source.size, ZIP_MAGIC.length));
    const isZip = ZIP_MAGIC.every((b, i) => head[i] === b);
    return isZip ? await openTorchExpert(path, source) : await openSafetensorsExpert(path, source);
  } catch (error) {
    await source.close().catch(() => {});
    throw unreadable(path, error, "expert");
  }
}

/** Opens a Hugging Face base directory (sharded with an index, or one model.safetensors); headers only. */
export async function openBase(dir: string): Promise<TensorInput> {
  let hf: Awaited<ReturnType<typeof openHfDirectory>>;
  try {
    hf = await openHfDirectory(dir);
  } catch (error) {
    throw unreadable(dir, error, "the base");
  }
  const byName = new Map<string, HfTensorInfo>(hf.tensors.map((t) => [t.name, t]));
  const shards = new Map<string, Promise<ByteSource>>();
  const shardSource = (shard: string) => {
    let source = shards.get(shard);
    if (source === undefined) {
      source = openSource(join(dir, shard), "the base");
      shards.set(shard, source);
    }
    return source;
  };
  const files = [
    ...(hf.indexFile === undefined ? [] : [join(dir, HF_INDEX_FILE)]),
    ...hf.files.map((f) => join(dir, f.file)),
  ];
  return {
    file: dir,
    listing: {
      file: dir,
      tensors: hf.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
    },
    async readRange(name, start, length, into) {
      const info = byName.get(name)!;
      return (await shardSource(info.file)).read(info.dataOffset + start, length, into);
    },
    files,
    opened: await Promise.all(files.map(stampOf)),
    async close() {
      await hf.close();
      for (const source of shards.values()) await (await source).close();
    },
  };
}
