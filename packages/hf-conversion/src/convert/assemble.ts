import { dtypeSize } from "@ckpt/tensors";
import type { OutputTensor, RuleInstance } from "../plan/mapping.js";
import {
  type CompiledGroup,
  type ExpertTensorGroup,
  groupKey,
  matrixShape,
  type PartDims,
  partHome,
} from "../plan/rules.js";

/** Reads bytes of a source tensor (by key without `net.`) into a caller buffer. */
export interface SourceBytes {
  read(name: string, start: number, length: number, into: Uint8Array): Promise<Uint8Array>;
  /**
   * The source file, for readers on other threads: a path to its open file and where a tensor's
   * bytes start in it (undefined for a tensor not stored as one contiguous range).
   */
  readonly file?: { readonly path: string; offset(name: string): Promise<number | undefined> };
}

/**
 * Bytes of one copy chunk, for the copied tensors the writing thread cannot take as a range of the
 * source file (strided views, compressed storages): large enough to amortise a read.
 */
const COPY_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * A reusable buffer that grows to the largest request; views start at offset 0 (typed-array
 * aligned). Its memory is shared, so the writing thread reads a chunk in place (no copy) while the
 * caller waits.
 */
export class GrowableBuffer {
  private buffer: Uint8Array = new Uint8Array(0);

  view(length: number): Uint8Array {
    if (this.buffer.length < length) this.buffer = new Uint8Array(new SharedArrayBuffer(length));
    return this.buffer.subarray(0, length);
  }
}

const TILE = 32;

function lanesView(
  bytes: Uint8Array,
  elem: number,
): { view: Uint8Array | Uint16Array | Uint32Array; lanes: number } {
  const { buffer, byteOffset, byteLength } = bytes;
  if (elem === 1) return { view: bytes, lanes: 1 };
  if (elem === 2) return { view: new Uint16Array(buffer, byteOffset, byteLength / 2), lanes: 1 };
  return { view: new Uint32Array(buffer, byteOffset, byteLength / 4), lanes: elem / 4 };
}

/**
 * Copies part `sp` of one expert's matrix in `src` (laid out as `sg`) into part `dp` of `dst`
 * (laid out as `dg`), transposing when the orientations differ. Both buffers start at a
 * multiple of the element size.
 */
function copyPart(
  src: Uint8Array,
  sg: ExpertTensorGroup,
  sp: number,
  dst: Uint8Array,
  dg: ExpertTensorGroup,
  dp: number,
  dims: PartDims,
  elem: number,
): void {
  const { out, in: inn } = dims;
  if (sg.orientation === "out_in" && dg.orientation === "out_in") {
    const n = out * inn * elem;
    dst.set(src.subarray(sp * n, sp * n + n), dp * n);
    return;
  }
  const sRow = sg.parts.length * out;
  const dRow = dg.parts.length * out;
  if (sg.orientation === "in_out" && dg.orientation === "in_out") {
    for (let i = 0; i < inn; i++) {
      const from = (i * sRow + sp * out) * elem;
      dst.set(src.subarray(from, from + out * elem), (i * dRow + dp * out) * elem);
    }
    return;
  }
  const s = lanesView(src, elem);
  const d = lanesView(dst, elem);
  const lanes = s.lanes;
  const S = s.view;
  const D = d.view;
  // Element (o, i) sits at (p·out + o)·in + i in out_in and at i·row + p·out + o in in_out.
  const fromOutIn = sg.orientation === "out_in";
  for (let o0 = 0; o0 < out; o0 += TILE) {
    const o1 = Math.min(out, o0 + TILE);
    for (let i0 = 0; i0 < inn; i0 += TILE) {
      const i1 = Math.min(inn, i0 + TILE);
      for (let o = o0; o < o1; o++) {
        for (let i = i0; i < i1; i++) {
          const a = fromOutIn ? (sp * out + o) * inn + i : i * sRow + sp * out + o;
          const b = fromOutIn ? i * dRow + dp * out + o : (dp * out + o) * inn + i;
          if (lanes === 1) D[b] = S[a]!;
          else for (let l = 0; l < lanes; l++) D[b * lanes + l] = S[a * lanes + l]!;
        }
      }
    }
  }
}

/** Bytes of one expert's matrix of `group`. */
export function expertBlockBytes(instance: RuleInstance, group: ExpertTensorGroup): number {
  const [a, b] = matrixShape(group, instance.dims.get(group.parts[0]!)!);
  return a * b * dtypeSize(instance.dtype);
}

/** Buffers reused from tensor to tensor, so memory stays bounded by a chunk and a few expert blocks. */
export class AssemblyBuffers {
  /** Two copy buffers: one is written out while the next chunk is read into the other. */
  readonly chunks = [new GrowableBuffer(), new GrowableBuffer()] as const;
  readonly block = new GrowableBuffer();
  private readonly sources = new Map<
    CompiledGroup,
    { buffer: GrowableBuffer; key?: string; bytes?: Uint8Array }
  >();

  /** One expert's matrix of checkpoint group `group`, read once and kept while the next parts need it. */
  async sourceBlock(
    source: SourceBytes,
    instance: RuleInstance,
    group: CompiledGroup,
    expert: number,
  ): Promise<Uint8Array> {
    let slot = this.sources.get(group);
    if (!slot) {
      slot = { buffer: new GrowableBuffer() };
      this.sources.set(group, slot);
    }
    const key = `${instance.prefix}\u0000${expert}`;
    if (slot.key === key && slot.bytes) return slot.bytes;
    const size = expertBlockBytes(instance, group);
    const name = groupKey(group, instance.prefix, expert);
    slot.bytes = await source.read(name, group.stacked ? expert * size : 0, size, slot.buffer.view(size));
    slot.key = key;
    return slot.bytes;
  }
}

/**
 * The bytes of one output tensor as a sequence of chunks, produced one at a time into reused
 * buffers: a chunk must be consumed (written) before the next is requested.
 */
export async function* tensorChunks(
  tensor: OutputTensor,
  source: SourceBytes,
  buffers: AssemblyBuffers,
): AsyncGenerator<Uint8Array> {
  const recipe = tensor.recipe;
  if (recipe.kind === "copy") {
    // Read-ahead: chunk k+1 is read while the caller writes chunk k (from the other buffer).
    const read = (k: number) => {
      const start = k * COPY_CHUNK_BYTES;
      const length = Math.min(COPY_CHUNK_BYTES, tensor.byteLength - start);
      return source.read(recipe.source, start, length, buffers.chunks[k % 2]!.view(length));
    };
    const count = Math.ceil(tensor.byteLength / COPY_CHUNK_BYTES);
    let next = count > 0 ? read(0) : undefined;
    try {
      for (let k = 0; k < count; k++) {
        const chunk = await next!;
        next = k + 1 < count ? read(k + 1) : undefined;
        yield chunk;
      }
    } finally {
      // A caller that stops early leaves a read in flight: its outcome no longer matters.
      next?.catch(() => {});
    }
    return;
  }
  const { instance, group } = recipe;
  const elem = dtypeSize(instance.dtype);
  const experts =
    recipe.expert === undefined ? Array.from({ length: instance.experts }, (_, e) => e) : [recipe.expert];
  const size = expertBlockBytes(instance, group);
  for (const expert of experts) {
    const block = buffers.block.view(size);
    for (const [dp, part] of group.parts.entries()) {
      const home = partHome(instance.rule.checkpoint, part);
      const src = await buffers.sourceBlock(source, instance, home.group, expert);
      copyPart(src, home.group, home.index, block, group, dp, instance.dims.get(part)!, elem);
    }
    yield block;
  }
}
