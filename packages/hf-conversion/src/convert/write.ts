import { mkdir, open } from "node:fs/promises";
import { dirname, join } from "node:path";
import { type FileEntry, type HashStream, StreamHasher, writeFully } from "@ckpt/manifest";
import { HF_INDEX_FILE, planSafetensors, type SafetensorsIndex, type SafetensorsPlan } from "@ckpt/tensors";
import { HfConversionError, quote } from "../errors.js";
import type { ConversionPlan, OutputShard } from "../plan/mapping.js";
import type { OpenedSource } from "../source/open.js";
import { AssemblyBuffers, type SourceBytes, tensorChunks } from "./assemble.js";

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

/** The bytes of one shard: its header, then every tensor's chunks in data order. */
async function* shardChunks(
  shard: OutputShard,
  layout: SafetensorsPlan,
  source: SourceBytes,
  buffers: AssemblyBuffers,
): AsyncGenerator<Uint8Array> {
  yield layout.headerBytes;
  for (const tensor of shard.tensors) {
    let written = 0;
    for await (const chunk of tensorChunks(tensor, source, buffers)) {
      written += chunk.length;
      yield chunk;
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

/** Bytes between two progress events. */
const PROGRESS_BYTES = 64 * 1024 * 1024;

/**
 * The index the output gets: the base's metadata with the output's total size, and the base's
 * weight_map in the base's key order.
 */
export function indexText(plan: ConversionPlan, baseIndex: SafetensorsIndex): string {
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

/** Bytes written between two background flushes of a file (its writeback then overlaps the writing). */
const FLUSH_BYTES = 256 * 1024 * 1024;

/** A file of the staging directory: its size once written; its digest once it is durable. */
export interface StagedFile {
  readonly path: string;
  readonly size: number;
  /** Resolves once the file is fsynced, with the digest of the bytes written. */
  readonly settled: Promise<FileEntry>;
}

/**
 * Writes one file of the staging directory, yielding the size of each chunk once it is written:
 * created exclusively and streamed, with a background fdatasync every {@link FLUSH_BYTES} so the
 * disk writes while this keeps producing. No temporary and rename: the staging directory as a
 * whole is what appears atomically (the swap), and nothing in it counts before its marker is
 * written. Each chunk is hashed by `hash` (another thread) while it is written, so the digest
 * costs no read-back; the final fsync runs after the return, so the caller can go on meanwhile.
 */
async function* writeStagedChunks(
  path: string,
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  hash: HashStream,
): AsyncGenerator<number, StagedFile> {
  await mkdir(dirname(path), { recursive: true });
  const handle = await open(path, "wx");
  let size = 0;
  let unflushed = 0;
  let flushing: Promise<void> | undefined;
  let complete = false;
  try {
    for await (const chunk of chunks) {
      // Both must finish before the chunk's buffer is handed back for the next chunk.
      const [wrote, hashed] = await Promise.allSettled([writeFully(handle, chunk, size), hash.update(chunk)]);
      if (wrote.status === "rejected") throw wrote.reason;
      if (hashed.status === "rejected") throw hashed.reason;
      size += chunk.length;
      unflushed += chunk.length;
      if (unflushed >= FLUSH_BYTES && flushing === undefined) {
        unflushed = 0;
        flushing = handle.datasync().finally(() => {
          flushing = undefined;
        });
      }
      yield chunk.length;
    }
    complete = true;
  } finally {
    // A failure, or a caller that stopped early: close the file (the directory is removed later).
    if (!complete) {
      await flushing?.catch(() => {});
      await handle.close();
    }
  }
  const settled = (async (): Promise<FileEntry> => {
    try {
      await flushing;
      const [sha256] = await Promise.all([hash.digest(), handle.sync()]);
      return { path, size, sha256 };
    } finally {
      await handle.close();
    }
  })();
  // Observed by whoever awaits it; this only keeps an early failure from being reported as unhandled.
  settled.catch(() => {});
  return { path, size, settled };
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
  const layouts = plan.shards.map((shard) =>
    planSafetensors(
      shard.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
      shard.metadata,
    ),
  );
  const total = layouts.reduce((n, l) => n + l.fileSize, 0);
  const files: StagedFile[] = [];
  // One hashing thread for the run; it ends once every file has settled (or failed).
  const hasher = new StreamHasher(dir);
  let closing: Promise<void> | undefined;
  const closeHasher = () =>
    (closing ??= Promise.allSettled(files.map((f) => f.settled)).then(() => hasher.close()));
  const relative = (file: string, staged: StagedFile): StagedFile => ({
    path: file,
    size: staged.size,
    settled: staged.settled.then((entry) => ({ ...entry, path: file })),
  });
  let done = 0;
  let reported = 0;
  try {
    for (const [k, shard] of plan.shards.entries()) {
      const writer = writeStagedChunks(
        join(dir, ...shard.file.split("/")),
        shardChunks(shard, layouts[k]!, bytes, buffers),
        hasher.stream(),
      );
      try {
        for (;;) {
          const step = await writer.next();
          if (step.done) {
            files.push(relative(shard.file, step.value));
            onShardWritten(shard);
            break;
          }
          done += step.value;
          if (done - reported >= PROGRESS_BYTES) {
            reported = done;
            yield { type: "convert", doneBytes: done, totalBytes: total, file: shard.file };
          }
        }
      } finally {
        // Closes the shard when the caller stops early; a no-op once the writer has finished.
        await writer.return(undefined as never);
      }
    }
    const indexBytes = new TextEncoder().encode(indexText(plan, baseIndex));
    const index = writeStagedChunks(join(dir, HF_INDEX_FILE), [indexBytes], hasher.stream());
    for (;;) {
      const step = await index.next();
      if (step.done) {
        files.push(relative(HF_INDEX_FILE, step.value));
        break;
      }
    }
  } catch (error) {
    // Let the files already written finish closing before the caller removes the directory.
    await closeHasher();
    throw error;
  } finally {
    void closeHasher();
  }
  yield { type: "convert", doneBytes: done, totalBytes: total, file: HF_INDEX_FILE };
  return files;
}
