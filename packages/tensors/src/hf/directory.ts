import { stat } from "node:fs/promises";
import { join } from "node:path";
import { type ByteSource, ManifestError, openFileByteSource, parseStrictJson } from "@ckpt/manifest";
import { TensorsError, type TensorsErrorCode } from "../errors.js";
import { quote, type SafetensorsTensorInfo } from "../safetensors/header.js";
import { readExactly, readSafetensorsHeader } from "../safetensors/reader.js";

/** The index Hugging Face writes beside sharded weights. */
export const HF_INDEX_FILE = "model.safetensors.index.json";
/** The single-file weights Hugging Face writes when a model fits one shard. */
export const HF_SINGLE_FILE = "model.safetensors";
/** Largest accepted index file: a 100k-tensor model's index is ~10 MiB; bounds memory for a crafted one. */
export const MAX_INDEX_BYTES = 64 * 1024 * 1024;
/** Most shards an index may name: shard names carry five digits. */
export const MAX_SHARD_COUNT = 99_999;
/** An index nests three levels (root, weight_map or metadata, value); headroom for precise errors. */
const MAX_INDEX_JSON_DEPTH = 8;

/** A parsed, validated `model.safetensors.index.json`. */
export interface SafetensorsIndex {
  /** Tensor name -> shard file name (relative to the index's directory). */
  readonly weightMap: ReadonlyMap<string, string>;
  /** Distinct shard names in first-appearance order. */
  readonly shards: readonly string[];
  /** The `metadata` object as written (for example `total_size`), or empty. */
  readonly metadata: Readonly<Record<string, unknown>>;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

function indexError(
  code: TensorsErrorCode,
  file: string,
  what: string,
  tensor?: string,
  cause?: unknown,
): TensorsError {
  return new TensorsError(
    code,
    `read Hugging Face index ${file}: ${what}. The index is corrupt or was not written by a safetensors writer.`,
    { kind: "input", file, tensor, cause },
  );
}

/**
 * Refuses shard names that could escape the model directory or name a remote: empty names, `..`
 * or `.` segments, a leading `/`, `://`, backslashes, a scheme-like `x:` first segment and control
 * characters.
 */
export function checkShardName(name: string, file: string): void {
  const segments = name.split("/");
  const reason =
    name.length === 0
      ? "is empty"
      : name.startsWith("/")
        ? "is an absolute path"
        : name.includes("://")
          ? "is a URL"
          : name.includes("\\")
            ? "contains a backslash"
            : segments.some((s) => s === ".." || s === "." || s === "")
              ? "has an empty, '.' or '..' path segment"
              : segments[0]!.includes(":")
                ? "has a scheme-like first segment"
                : CONTROL_CHARACTER.test(name)
                  ? "contains a control character"
                  : undefined;
  if (reason !== undefined) {
    throw indexError("HF_INDEX_UNSAFE_SHARD_NAME", file, `shard name ${quote(name)} ${reason}`);
  }
}

/** Validates the text of a `model.safetensors.index.json`. Pure. */
export function parseSafetensorsIndex(text: string, options: { file: string }): SafetensorsIndex {
  const { file } = options;
  let json: unknown;
  try {
    json = parseStrictJson(text, { name: file, maxDepth: MAX_INDEX_JSON_DEPTH, maxLength: MAX_INDEX_BYTES });
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    const code = error.code === "JSON_DUPLICATE_KEY" ? "HF_INDEX_DUPLICATE_KEY" : "HF_INDEX_NOT_JSON";
    throw new TensorsError(code, `read Hugging Face index ${file}: ${error.message}`, {
      kind: "input",
      file,
      cause: error,
    });
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw indexError("HF_INDEX_INVALID", file, "the index is not a JSON object");
  }
  const record = json as Record<string, unknown>;
  const rawMap = record.weight_map;
  if (
    typeof rawMap !== "object" ||
    rawMap === null ||
    Array.isArray(rawMap) ||
    Object.keys(rawMap).length === 0
  ) {
    throw indexError(
      "HF_INDEX_INVALID",
      file,
      "weight_map is missing, empty or not an object of name -> shard",
    );
  }
  const metadata = record.metadata ?? {};
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    throw indexError("HF_INDEX_INVALID", file, "metadata is not an object");
  }
  const weightMap = new Map<string, string>();
  const shards: string[] = [];
  const seen = new Set<string>();
  for (const [name, shard] of Object.entries(rawMap)) {
    if (typeof shard !== "string") {
      throw indexError("HF_INDEX_INVALID", file, `weight_map[${quote(name)}] is not a shard file name`, name);
    }
    if (!seen.has(shard)) {
      checkShardName(shard, file);
      seen.add(shard);
      shards.push(shard);
      if (shards.length > MAX_SHARD_COUNT) {
        throw indexError(
          "HF_INDEX_TOO_MANY_SHARDS",
          file,
          `the index names more than ${MAX_SHARD_COUNT} shards`,
        );
      }
    }
    weightMap.set(name, shard);
  }
  return { weightMap, shards, metadata: metadata as Record<string, unknown> };
}

/** A tensor of a Hugging Face directory: where it is, in which shard. */
export interface HfTensorInfo extends SafetensorsTensorInfo {
  /** Shard file name relative to the directory. */
  readonly file: string;
}

/** An opened Hugging Face weights directory (sharded with an index, or one `model.safetensors`). */
export interface HfDirectory {
  readonly dir: string;
  /** The index file name, when the weights are sharded. */
  readonly indexFile: string | undefined;
  readonly index: SafetensorsIndex | undefined;
  /** Safetensors files, relative to `dir`, in index order, with their sizes. */
  readonly files: readonly { readonly file: string; readonly size: number }[];
  /** Every tensor, shard by shard, each shard in data order. */
  readonly tensors: readonly HfTensorInfo[];
  /** The tensor called `name`, or undefined. */
  tensor(name: string): HfTensorInfo | undefined;
  /** Reads one tensor's raw bytes into `into` (or a new buffer) with one positioned read. */
  readTensor(name: string, into?: Uint8Array): Promise<Uint8Array>;
  /** Closes the shard files opened by `readTensor`. */
  close(): Promise<void>;
}

async function openExisting(path: string): Promise<ByteSource> {
  try {
    return await openFileByteSource(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TensorsError(
      code === "ENOENT" ? "HF_SHARD_MISSING" : "HF_SHARD_UNREADABLE",
      `open ${path}: ${code === "ENOENT" ? "no such file" : error instanceof Error ? error.message : String(error)}. The directory is incomplete or unreadable.`,
      { kind: code === "ENOENT" ? "input" : "failed", file: path, cause: error },
    );
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * Opens a Hugging Face weights directory: with `model.safetensors.index.json`, every shard's header
 * is read and validated and the tensors must be exactly the index's keys, each in the shard the
 * index names; without it, a single `model.safetensors`. Only headers are read here.
 */
export async function openHfDirectory(dir: string): Promise<HfDirectory> {
  const indexPath = join(dir, HF_INDEX_FILE);
  let index: SafetensorsIndex | undefined;
  let shardNames: readonly string[];
  if (await isFile(indexPath)) {
    const source = await openExisting(indexPath);
    try {
      if (source.size > MAX_INDEX_BYTES) {
        throw indexError(
          "HF_INDEX_TOO_LARGE",
          indexPath,
          `the index is ${source.size} bytes; the limit is ${MAX_INDEX_BYTES}`,
        );
      }
      const bytes = await readExactly(source, 0, source.size, "Hugging Face index");
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
      } catch (error) {
        throw indexError("HF_INDEX_NOT_JSON", indexPath, "the index is not valid UTF-8", undefined, error);
      }
      index = parseSafetensorsIndex(text, { file: indexPath });
    } finally {
      await source.close();
    }
    shardNames = index.shards;
  } else if (await isFile(join(dir, HF_SINGLE_FILE))) {
    shardNames = [HF_SINGLE_FILE];
  } else {
    throw new TensorsError(
      "HF_NO_WEIGHTS",
      `open Hugging Face directory ${dir}: neither ${HF_INDEX_FILE} nor ${HF_SINGLE_FILE} is there. Point at a directory holding safetensors weights.`,
      { kind: "input", file: dir },
    );
  }
  const files: { file: string; size: number }[] = [];
  const tensors: HfTensorInfo[] = [];
  const byName = new Map<string, HfTensorInfo>();
  for (const shard of shardNames) {
    const source = await openExisting(join(dir, shard));
    try {
      const header = await readSafetensorsHeader(source);
      files.push({ file: shard, size: source.size });
      for (const t of header.tensors) {
        const listed = index?.weightMap.get(t.name);
        if (index && listed !== shard) {
          throw indexError(
            "HF_INDEX_TENSOR_MISMATCH",
            indexPath,
            listed === undefined
              ? `shard ${quote(shard)} holds tensor ${quote(t.name)}, which the index does not list`
              : `shard ${quote(shard)} holds tensor ${quote(t.name)}, which the index places in ${quote(listed)}`,
            t.name,
          );
        }
        const info = { ...t, file: shard };
        tensors.push(info);
        byName.set(t.name, info);
      }
    } finally {
      await source.close();
    }
  }
  if (index) {
    for (const [name, shard] of index.weightMap) {
      if (!byName.has(name)) {
        throw indexError(
          "HF_INDEX_TENSOR_MISMATCH",
          indexPath,
          `the index places tensor ${quote(name)} in ${quote(shard)}, which does not hold it`,
          name,
        );
      }
    }
  }
  const open = new Map<string, Promise<ByteSource>>();
  return {
    dir,
    indexFile: index ? HF_INDEX_FILE : undefined,
    index,
    files,
    tensors,
    tensor: (name) => byName.get(name),
    async readTensor(name, into) {
      const info = byName.get(name);
      if (!info) {
        throw new TensorsError(
          "SAFETENSORS_TENSOR_NOT_FOUND",
          `read tensor ${quote(name)} of ${dir}: no such tensor. The directory lists ${tensors.length} tensors.`,
          { kind: "input", file: dir, tensor: name },
        );
      }
      if (into && into.length < info.byteLength) {
        throw new TensorsError(
          "SAFETENSORS_BUFFER_TOO_SMALL",
          `read tensor ${quote(name)} of ${dir}: buffer holds ${into.length} bytes but the tensor has ${info.byteLength}. Pass a buffer of at least byteLength bytes.`,
          { kind: "input", file: dir, tensor: name },
        );
      }
      let source = open.get(info.file);
      if (!source) {
        source = openExisting(join(dir, info.file));
        open.set(info.file, source);
      }
      return readExactly(await source, info.dataOffset, info.byteLength, `tensor ${quote(name)}`, into);
    },
    async close() {
      const sources = [...open.values()];
      open.clear();
      for (const s of sources) await (await s).close();
    },
  };
}
