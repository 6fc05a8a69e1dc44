import { createHash } from "node:crypto";
import { stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { type ByteSource, type InventoryTensor, openFileByteSource } from "@ckpt/manifest";
import { type DcpProblem, dcpCompleteness, observeDcpSizes } from "./dcp/completeness.js";
import { DCP_METADATA_FILE, readDcpMetadata } from "./dcp/metadata.js";
import { dtypeSize } from "./dtypes.js";
import { TensorsError } from "./errors.js";
import { openHfDirectory } from "./hf/directory.js";
import { readExactly, readSafetensorsHeader } from "./safetensors/reader.js";
import { LEGACY_HEAD_BYTES, looksLikeTorchFile, openTorchFile } from "./torch/reader.js";

export type InspectKind = "safetensors" | "hf-directory" | "torch" | "dcp";

/** One tensor as `inspect` reports it. */
export interface InspectedTensor {
  readonly name: string;
  /** The safetensors dtype name (F32, BF16, ...), or torch's name for a DCP type ckpt has none for (complex64). */
  readonly dtype: string;
  readonly shape: readonly number[];
  /** Bytes of the tensor's elements (for a DCP tensor of a type ckpt has no name for: its stored bytes). */
  readonly bytes: number;
  /** The file holding it, relative to the inspected directory (or the inspected file's name); DCP: its files, comma-separated. */
  readonly file: string;
  /**
   * Hex SHA-256 of the tensor's raw little-endian contiguous bytes, when asked for (safetensors,
   * HF directories, torch files; a DCP tensor is stored in chunks across files and has none).
   */
  readonly sha256?: string;
}

/** What a checkpoint path holds. */
export interface InspectReport {
  readonly kind: InspectKind;
  readonly path: string;
  /** Files read, relative to `path` for a directory, with their sizes. */
  readonly files: readonly { readonly file: string; readonly size: number }[];
  readonly tensors: readonly InspectedTensor[];
  /** safetensors `__metadata__` (of the single file, or of the first shard); empty for torch and DCP. */
  readonly metadata: Readonly<Record<string, string>>;
  /**
   * DCP only: what keeps a load from finding every piece (`dcpCompleteness`: missing, short or
   * unreferenced shards, chunks that do not tile a tensor); empty when the directory is complete.
   */
  readonly problems?: readonly DcpProblem[];
}

export interface InspectOptions {
  /** Hash every tensor's bytes (reads all data). */
  readonly sha256?: boolean;
  /** Called after each tensor is hashed: bytes hashed so far of all tensors to hash. */
  readonly onProgress?: (event: { path: string; doneBytes: number; totalBytes: number }) => void;
}

/** Counts hashed tensor bytes for `onProgress`; a no-op without a listener. */
function tally(
  options: InspectOptions,
  tensors: readonly { readonly byteLength: number }[],
): (name: string, bytes: number) => void {
  const totalBytes = tensors.reduce((sum, t) => sum + t.byteLength, 0);
  let doneBytes = 0;
  return (name, bytes) => {
    doneBytes += bytes;
    options.onProgress?.({ path: name, doneBytes, totalBytes });
  };
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

async function inspectSafetensorsFile(path: string, options: InspectOptions): Promise<InspectReport> {
  return withSource(path, async (source) => {
    const header = await readSafetensorsHeader(source);
    const file = basename(path);
    const tensors: InspectedTensor[] = [];
    const hashed = tally(options, header.tensors);
    for (const t of header.tensors) {
      const base = { name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, file };
      if (!options.sha256) {
        tensors.push(base);
        continue;
      }
      tensors.push({
        ...base,
        sha256: await hashRange(source, t.dataOffset, t.byteLength, `tensor ${t.name}`),
      });
      hashed(t.name, t.byteLength);
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

async function inspectHfDirectory(path: string, options: InspectOptions): Promise<InspectReport> {
  const hf = await openHfDirectory(path);
  const tensors: InspectedTensor[] = [];
  const hashed = tally(options, hf.tensors);
  const sources = new Map<string, ByteSource>();
  try {
    for (const t of hf.tensors) {
      const base = { name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, file: t.file };
      if (!options.sha256) {
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
      hashed(t.name, t.byteLength);
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

async function inspectTorchFile(
  path: string,
  source: ByteSource,
  options: InspectOptions,
): Promise<InspectReport> {
  // TorchFile.close() only closes `source`, which the caller (withSource) owns and closes.
  const torch = await openTorchFile(source);
  const file = basename(path);
  const tensors: InspectedTensor[] = [];
  const hashed = tally(options, torch.tensors);
  for (const t of torch.tensors) {
    const base = { name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, file };
    if (!options.sha256) {
      tensors.push(base);
      continue;
    }
    const hash = createHash("sha256");
    for await (const piece of torch.tensorPieces(t, HASH_CHUNK_BYTES)) hash.update(piece);
    tensors.push({ ...base, sha256: hash.digest("hex") });
    hashed(t.name, t.byteLength);
  }
  return { kind: "torch", path, files: [{ file, size: source.size }], tensors, metadata: {} };
}

async function inspectDcpDirectory(path: string): Promise<InspectReport> {
  const metadata = await readDcpMetadata(path);
  const tensors: InspectedTensor[] = metadata.tensors.map((t) => {
    const stored = t.chunks.reduce((sum, c) => sum + (c.storage?.length ?? 0), 0);
    const bytes = t.dtype === undefined ? stored : t.shape.reduce((a, d) => a * d, 1) * dtypeSize(t.dtype);
    const files = [...new Set(t.chunks.flatMap((c) => (c.storage ? [c.storage.relativePath] : [])))];
    return { name: t.fqn, dtype: t.dtype ?? t.torchDtype, shape: t.shape, bytes, file: files.join(",") };
  });
  const sizes = await observeDcpSizes(path, metadata);
  const files = [
    { file: DCP_METADATA_FILE, size: (await stat(join(path, DCP_METADATA_FILE))).size },
    ...[...sizes].map(([file, size]) => ({ file, size })),
  ];
  return { kind: "dcp", path, files, tensors, metadata: {}, problems: dcpCompleteness(metadata, sizes) };
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
 * Lists the tensors of a checkpoint path: a `.safetensors` file, a Hugging Face directory
 * (`model.safetensors.index.json` or `model.safetensors`), a torch.save file (recognised by its
 * zip signature, whatever its extension) or a torch.distributed.checkpoint directory (`.metadata`).
 * Reads headers and metadata only, unless `sha256` is set: then every tensor's bytes are hashed
 * (streamed in bounded chunks, strided torch views in row-major order; DCP tensors get no hash).
 */
export async function inspectPath(path: string, options: InspectOptions = {}): Promise<InspectReport> {
  const info = await statOrThrow(path);
  if (info.isDirectory()) {
    if (
      (await exists(join(path, "model.safetensors.index.json"))) ||
      (await exists(join(path, "model.safetensors")))
    ) {
      return inspectHfDirectory(path, options);
    }
    if (await exists(join(path, DCP_METADATA_FILE))) return inspectDcpDirectory(path);
  } else if (path.endsWith(".safetensors")) {
    return inspectSafetensorsFile(path, options);
  } else {
    const report = await withSource(path, async (source) => {
      const head = await readExactly(source, 0, Math.min(LEGACY_HEAD_BYTES, source.size), "file signature");
      return looksLikeTorchFile(head) ? inspectTorchFile(path, source, options) : undefined;
    });
    if (report) return report;
  }
  throw new TensorsError(
    "INSPECT_UNKNOWN_FORMAT",
    `inspect ${path}: not a .safetensors file, a torch.save file, a Hugging Face weights directory or a DCP checkpoint directory. Point at a checkpoint file or directory.`,
    { kind: "input", file: path },
  );
}

/**
 * The tensors a checkpoint component holds, with dtype and (global) shape, read as `inspect` reads
 * them: a torch.save file's pickle, a DCP directory's `.metadata`; no tensor data is read. This is
 * the list a checkpoint description summarises and `verify` recomputes.
 */
export async function listTensors(path: string): Promise<InventoryTensor[]> {
  const report = await inspectPath(path);
  return report.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: [...t.shape] }));
}
