import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { FileEntry } from "@ckpt/manifest";
import { HF_INDEX_FILE, planSafetensors, type SafetensorsIndex, type SafetensorsPlan } from "@ckpt/tensors";
import { describeUnfinishedWrite, isNoSpace } from "@ckpt/errors";
import { HfConversionError, noSpace, quote } from "../errors.js";
import type { ConversionPlan, OutputShard } from "../plan/mapping.js";
import type { OpenedSource } from "../source/open.js";
import { AssemblyBuffers, type SourceBytes, tensorChunks } from "./assemble.js";
import { ShardWriter } from "./shard-writer.js";

/** Reads source tensor bytes from the opened model.pt; a strided tensor is read whole once. */
export function sourceBytes(source: OpenedSource): SourceBytes {
  let strided: { name: string; bytes: Uint8Array } | undefined;
  return {
    async read(name, start, length, into) {
      const entry = source.entry(name);
      if (entry.contiguous || entry.byteLength === 0)
        return source.torch.readTensorRange(entry, start, length, into);
      if (strided?.name !== name) strided = { name, bytes: await source.torch.readTensor(entry) };
      into.set(strided.bytes.subarray(start, start + length));
      return into.subarray(0, length);
    },
    file: { path: source.openPath, offset: (name) => source.torch.tensorFileOffset(source.entry(name)) },
  };
}

/** Progress of the conversion: bytes of shard files written so far, of all shards' bytes. */
export interface ConvertProgress {
  readonly type: "convert";
  readonly doneBytes: number;
  readonly totalBytes: number;
  readonly file: string;
}

/** Part of a file: bytes from the caller, or a range of the source file copied by the writing thread. */
type Piece = { readonly bytes: Uint8Array } | { readonly from: number; readonly length: number };

const pieceLength = (piece: Piece) => ("bytes" in piece ? piece.bytes.length : piece.length);

/**
 * The pieces of one shard: its header, then every tensor in data order, a tensor stored as one
 * range of the source as ranges of it (no bytes through this thread), any other as its chunks.
 */
async function* shardPieces(
  shard: OutputShard,
  layout: SafetensorsPlan,
  source: SourceBytes,
  buffers: AssemblyBuffers,
): AsyncGenerator<Piece> {
  yield { bytes: layout.headerBytes };
  for (const tensor of shard.tensors) {
    const from = tensor.recipe.kind === "copy" ? await source.file?.offset(tensor.recipe.source) : undefined;
    if (from !== undefined) {
      for (let at = 0; at < tensor.byteLength; at += RANGE_PIECE_BYTES)
        yield { from: from + at, length: Math.min(RANGE_PIECE_BYTES, tensor.byteLength - at) };
      continue;
    }
    let written = 0;
    for await (const chunk of tensorChunks(tensor, source, buffers)) {
      written += chunk.length;
      yield { bytes: chunk };
    }
    if (written !== tensor.byteLength) {
      throw new HfConversionError(
        "MATERIALIZE_BUILD_FAILED",
        `convert tensor ${quote(tensor.name)}: produced ${written} bytes, expected ${tensor.byteLength}. This is a bug in the conversion.`,
        { kind: "failed", key: tensor.name },
      );
    }
  }
}

/** Largest range handed to the writing thread at once: progress is reported between them. */
const RANGE_PIECE_BYTES = 16 * 1024 * 1024;

/** Bytes between two progress events. */
const PROGRESS_BYTES = 64 * 1024 * 1024;

/**
 * The index the output gets: the base's metadata with the output's total size, and the base's
 * weight_map in the base's key order.
 */
function indexText(plan: ConversionPlan, baseIndex: SafetensorsIndex): string {
  const weightMap: Record<string, string> = {};
  for (const [name, shard] of baseIndex.weightMap) {
    Object.defineProperty(weightMap, name, {
      value: shard,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  const metadata = { ...baseIndex.metadata, total_size: plan.totalBytes };
  return `${JSON.stringify({ metadata, weight_map: weightMap }, null, 2)}\n`;
}

/** Each output shard's layout (header and data offsets), from the plan alone. */
function shardLayouts(plan: ConversionPlan): SafetensorsPlan[] {
  return plan.shards.map((shard) =>
    planSafetensors(
      shard.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
      shard.metadata,
    ),
  );
}

/** Bytes the shards and the index will take, known before any is written. */
export function plannedShardBytes(plan: ConversionPlan, baseIndex: SafetensorsIndex): number {
  const shards = shardLayouts(plan).reduce((n, l) => n + l.fileSize, 0);
  return shards + Buffer.byteLength(indexText(plan, baseIndex));
}

/** A file of the staging directory: its size once written; its digest once it is durable. */
export interface StagedFile {
  readonly path: string;
  readonly size: number;
  /** Resolves once the file is fsynced, with the digest of the bytes written. */
  readonly settled: Promise<FileEntry>;
}

/**
 * Writes every output shard and then the index into the staging directory `dir`, streaming one
 * tensor chunk at a time, and yields progress; `onShardWritten` hears of each shard once its bytes
 * are all written. Returns the files (paths relative to `dir`), whose `settled` promises give the
 * digests the marker records once each file is durable.
 */
export async function* writeShards(
  dir: string,
  plan: ConversionPlan,
  source: OpenedSource,
  baseIndex: SafetensorsIndex,
  onShardWritten: (shard: OutputShard) => void = () => {},
): AsyncGenerator<ConvertProgress, StagedFile[]> {
  const bytes = sourceBytes(source);
  const buffers = new AssemblyBuffers();
  const layouts = shardLayouts(plan);
  const total = layouts.reduce((n, l) => n + l.fileSize, 0);
  const files: StagedFile[] = [];
  const writer = new ShardWriter(source.openPath);
  // The thread ends once every file has settled (or failed), so none is left open.
  let closing: Promise<void> | undefined;
  const shutdown = () =>
    (closing ??= Promise.allSettled(files.map((f) => f.settled)).then(() => writer.shutdown()));
  let done = 0;
  let reported = 0;
  /** Writes one file (path relative to `dir`), yielding progress, and records it in `files`. */
  async function* writeFile(file: string, pieces: AsyncIterable<Piece>): AsyncGenerator<ConvertProgress> {
    const path = join(dir, ...file.split("/"));
    try {
      yield* writeFileBytes(path, file, pieces);
    } catch (error) {
      // A full disk is named with the shards' bytes still unwritten: what must be freed.
      throw isNoSpace(error)
        ? noSpace(describeUnfinishedWrite(path, total - done), path, "convert", error)
        : error;
    }
  }
  async function* writeFileBytes(
    path: string,
    file: string,
    pieces: AsyncIterable<Piece>,
  ): AsyncGenerator<ConvertProgress> {
    await mkdir(dirname(path), { recursive: true });
    const out = await writer.open(path);
    let size = 0;
    try {
      for await (const piece of pieces) {
        if ("bytes" in piece) await out.bytes(piece.bytes);
        else await out.range(piece.from, piece.length);
        size += pieceLength(piece);
        done += pieceLength(piece);
        if (done - reported >= PROGRESS_BYTES) {
          reported = done;
          yield { type: "convert", doneBytes: done, totalBytes: total, file };
        }
      }
    } finally {
      // Closed even when this stops early or fails: the fsync is wasted then, but no file stays open.
      const settled = out.close().then(({ sha256 }) => ({ path: file, size, sha256 }));
      settled.catch(() => {});
      files.push({ path: file, size, settled });
    }
  }
  try {
    for (const [k, shard] of plan.shards.entries()) {
      yield* writeFile(shard.file, shardPieces(shard, layouts[k]!, bytes, buffers));
      onShardWritten(shard);
    }
    const indexBytes = new TextEncoder().encode(indexText(plan, baseIndex));
    yield* writeFile(
      HF_INDEX_FILE,
      (async function* () {
        yield { bytes: indexBytes };
      })(),
    );
  } catch (error) {
    // Let the files already written finish closing before the caller removes the directory.
    await shutdown();
    throw error;
  } finally {
    void shutdown();
  }
  yield { type: "convert", doneBytes: done, totalBytes: total, file: HF_INDEX_FILE };
  return files;
}
