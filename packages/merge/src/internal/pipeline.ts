import { setImmediate as nextTurn } from "node:timers/promises";
import { dtypeSize } from "@ckpt/tensors";
import { MergeError } from "../errors.js";
import type { MergePlan } from "../plan.js";
import type { TensorInput } from "./inputs.js";
import type { MergeKernel, TensorStats } from "./kernel.js";

/** Default elements per chunk: 2 MiB per BF16 input per read, large enough for few syscalls. */
export const DEFAULT_CHUNK_ELEMENTS = 1 << 20;
/**
 * Chunks in flight: one being written, one being computed, one being read. Memory is
 * `DEPTH × (inputs + 1) × chunk` bytes whatever the model or tensor size.
 */
const DEPTH = 3;

interface Chunk {
  readonly tensor: number;
  /** In elements. */
  readonly start: number;
  readonly count: number;
}

interface Slot {
  readonly inputs: Uint8Array[];
  readonly out: Uint8Array;
}

/**
 * Streams a merge chunk by chunk across all tensors: while chunk j is written by the caller,
 * chunk j+1 is computed on this thread and chunk j+2 is read (positioned reads on the thread
 * pool). Chunks are computed in order, so the diagnostics sum in a fixed order.
 */
export class ChunkPipeline {
  private readonly chunks: Chunk[] = [];
  private readonly firstChunk: number[] = [];
  private readonly slots: Slot[];
  private readonly reads = new Map<number, Promise<void>>();
  private readonly computed = new Map<number, Promise<Uint8Array>>();
  private readonly inputs: TensorInput[];

  constructor(
    private readonly plan: MergePlan,
    experts: readonly TensorInput[],
    base: TensorInput | undefined,
    private readonly kernel: MergeKernel,
    private readonly stats: readonly TensorStats[],
    chunkElements: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.inputs = [...experts, ...(base === undefined ? [] : [base])];
    plan.tensors.forEach((t, tensor) => {
      this.firstChunk.push(this.chunks.length);
      for (let start = 0; start < t.numel; start += chunkElements) {
        this.chunks.push({ tensor, start, count: Math.min(chunkElements, t.numel - start) });
      }
    });
    this.firstChunk.push(this.chunks.length);
    const largest = Math.min(chunkElements, Math.max(0, ...plan.tensors.map((t) => t.numel)));
    const bytes = largest * Math.max(1, ...plan.tensors.map((t) => dtypeSize(t.dtype)));
    // In the kernel's own memory, so the reads land where it computes.
    const buffers = kernel.allocate(DEPTH * (this.inputs.length + 1), bytes);
    this.slots = Array.from({ length: DEPTH }, () => ({
      inputs: this.inputs.map(() => buffers.pop()!),
      out: buffers.pop()!,
    }));
    for (let j = 0; j < Math.min(DEPTH, this.chunks.length); j++) this.startRead(j);
  }

  /** The merged bytes of tensor `index`, chunk by chunk; each view is valid until the next is asked for. */
  async *tensorChunks(index: number): AsyncGenerator<Uint8Array> {
    for (let j = this.firstChunk[index]!; j < this.firstChunk[index + 1]!; j++) yield await this.take(j);
  }

  private startRead(j: number): void {
    if (j >= this.chunks.length || this.reads.has(j)) return;
    const chunk = this.chunks[j]!;
    const tensor = this.plan.tensors[chunk.tensor]!;
    const size = dtypeSize(tensor.dtype);
    const slot = this.slots[j % DEPTH]!;
    const read = Promise.all(
      this.inputs.map(async (input, i) => {
        try {
          await input.readRange(tensor.name, chunk.start * size, chunk.count * size, slot.inputs[i]!);
        } catch (error) {
          throw new MergeError(
            "MERGE_INPUT_UNREADABLE",
            `merge: reading tensor ${tensor.name} of ${input.file} failed: ${error instanceof Error ? error.message : String(error)}. Was the file changed or truncated while the merge ran?`,
            { kind: "failed", file: input.file, tensor: tensor.name, cause: error },
          );
        }
      }),
    ).then(() => undefined);
    read.catch(() => {}); // awaited by compute(); a failure ahead of it must not be unhandled meanwhile
    this.reads.set(j, read);
  }

  private compute(j: number): Promise<Uint8Array> {
    let result = this.computed.get(j);
    if (result === undefined) {
      result = (async () => {
        await this.reads.get(j);
        // Yield once so the caller's write of the previous chunk is under way before this thread computes.
        await nextTurn();
        const chunk = this.chunks[j]!;
        const tensor = this.plan.tensors[chunk.tensor]!;
        const slot = this.slots[j % DEPTH]!;
        const bytes = chunk.count * dtypeSize(tensor.dtype);
        const experts = slot.inputs.slice(0, this.plan.experts);
        const base = this.plan.withBase ? slot.inputs[this.plan.experts] : undefined;
        const out = slot.out.subarray(0, bytes);
        this.kernel.run(tensor.dtype, experts, base, chunk.count, out, this.stats[chunk.tensor]!);
        return out;
      })();
      result.catch(() => {});
      this.computed.set(j, result);
    }
    return result;
  }

  private async take(j: number): Promise<Uint8Array> {
    if (this.signal?.aborted) {
      throw new MergeError("MERGE_ABORTED", "merge: aborted; the output was not changed.", {
        kind: "failed",
      });
    }
    const out = await this.compute(j);
    this.reads.delete(j);
    this.computed.delete(j);
    // The caller asks for chunk j only once chunk j-1 is written: its slot is free for chunk j-1+DEPTH.
    this.startRead(j - 1 + DEPTH);
    if (j + 1 < this.chunks.length) void this.compute(j + 1);
    return out;
  }
}
