import { createHash } from "node:crypto";
import { stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { type ByteSource, openFileByteSource } from "@ckpt/manifest";
import type { DType } from "./dtypes.js";
import { TensorsError } from "./errors.js";
import { openHfDirectory } from "./hf/directory.js";
import { readExactly, readSafetensorsHeader } from "./safetensors/reader.js";

export type InspectKind = "safetensors" | "hf-directory" | "torch" | "dcp";

/** One tensor as `inspect` reports it. */
export interface InspectedTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Bytes of the tensor's elements. */
  readonly bytes: number;
  /** The file holding it, relative to the inspected directory (or the inspected file's name). */
  readonly file: string;
  /** Hex SHA-256 of the tensor's raw little-endian bytes, when asked for. */
  readonly sha256?: string;
}

/** What a checkpoint path holds. */
export interface InspectReport {
  readonly kind: InspectKind;
  readonly path: string;
  /** Files read, relative to `path` for a directory, with their sizes. */
  readonly files: readonly { readonly file: string; readonly size: number }[];
  readonly tensors: readonly InspectedTensor[];
  /** safetensors `__metadata__` (of the single file, or of the first shard). */
  readonly metadata: Readonly<Record<string, string>>;
}

/** Bytes hashed per positioned read: large enough to amortise the call, small enough to keep memory flat. */
const HASH_CHUNK_BYTES = 8 * 1024 * 1024;

async function hashRange(source: ByteSource, offset: number, length: number, what: string): Promise<string> {
  const hash = createHash("sha256");
  const buffer = new Uint8Array(Math.min(HASH_CHUNK_BYTES, Math.max(length, 1)));
  for (let done = 0; done < length; ) {
    const n = Math.min(buffer.length, length - done);
    hash.update(await readExactly(source, offset + done, n, what, buffer));
    done += n;
  }
  return hash.digest("hex");
}

async function withSource<T>(path: string, use: (source: ByteSource) => Promise<T>): Promise<T> {
  const source = await openFileByteSource(path);
  try {
    return await use(source);
  } finally {
    await source.close();
  }
}

async function inspectSafetensorsFile(path: string, sha256: boolean): Promise<InspectReport> {
  return withSource(path, async (source) => {
    const header = await readSafetensorsHeader(source);
    const file = basename(path);
    const tensors: InspectedTensor[] = [];
    for (const t of header.tensors) {
      const base = { name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, file };
      tensors.push(
        sha256
          ? { ...base, sha256: await hashRange(source, t.dataOffset, t.byteLength, `tensor ${t.name}`) }
          : base,
      );
    }
    return {
      kind: "safetensors",
      path,
      files: [{ file, size: source.size }],
      tensors,
      metadata: header.metadata,
    };
  });
}

async function inspectHfDirectory(path: string, sha256: boolean): Promise<InspectReport> {
  const hf = await openHfDirectory(path);
  const tensors: InspectedTensor[] = [];
  const sources = new Map<string, ByteSource>();
  try {
    for (const t of hf.tensors) {
      const base = { name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, file: t.file };
      if (!sha256) {
        tensors.push(base);
        continue;
      }
      let source = sources.get(t.file);
      if (!source) {
        source = await openFileByteSource(join(path, t.file));
        sources.set(t.file, source);
      }
      tensors.push({
        ...base,
        sha256: await hashRange(source, t.dataOffset, t.byteLength, `tensor ${t.name}`),
      });
    }
  } finally {
    for (const s of sources.values()) await s.close();
    await hf.close();
  }
  const first = hf.files[0];
  const metadata = first
    ? await withSource(join(path, first.file), async (s) => (await readSafetensorsHeader(s)).metadata)
    : {};
  const files = hf.indexFile
    ? [{ file: hf.indexFile, size: (await stat(join(path, hf.indexFile))).size }, ...hf.files]
    : hf.files;
  return { kind: "hf-directory", path, files, tensors, metadata };
}

async function statOrThrow(path: string) {
  try {
    return await stat(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TensorsError(
      code === "ENOENT" ? "INSPECT_NOT_FOUND" : "INSPECT_UNREADABLE",
      `inspect ${path}: ${code === "ENOENT" ? "no such file or directory" : error instanceof Error ? error.message : String(error)}. Check the path.`,
      { kind: code === "ENOENT" ? "input" : "failed", file: path, cause: error },
    );
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Lists the tensors of a checkpoint path: a `.safetensors` file, or a Hugging Face directory
 * (`model.safetensors.index.json` or `model.safetensors`). Reads headers only, unless `sha256`
 * is set, in which case every tensor's bytes are hashed in bounded chunks.
 */
export async function inspectPath(path: string, options: { sha256?: boolean } = {}): Promise<InspectReport> {
  const sha256 = options.sha256 ?? false;
  const info = await statOrThrow(path);
  if (info.isDirectory()) {
    if (
      (await exists(join(path, "model.safetensors.index.json"))) ||
      (await exists(join(path, "model.safetensors")))
    ) {
      return inspectHfDirectory(path, sha256);
    }
  } else if (path.endsWith(".safetensors")) {
    return inspectSafetensorsFile(path, sha256);
  }
  throw new TensorsError(
    "INSPECT_UNKNOWN_FORMAT",
    `inspect ${path}: not a .safetensors file or a Hugging Face weights directory. Point at a checkpoint file or directory.`,
    { file: path },
  );
}
