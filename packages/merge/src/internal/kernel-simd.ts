import type { MergeMode } from "../request.js";
import type { ChunkBytes, TensorStats } from "./kernel.js";
import { KERNEL_SIMD_WASM_BASE64 } from "./kernel-simd.generated.js";

/** Elements per SIMD step: the kernel takes multiples of this; the caller merges the rest. */
export const SIMD_STEP = 8;

const PAGE = 65536;
/** A 32-bit WebAssembly memory holds at most 65536 pages. */
const MAX_MEMORY_BYTES = 65536 * PAGE;
const align16 = (n: number) => (n + 15) & ~15;

/** The part of the WebAssembly API used here (the TypeScript lib in use has no WebAssembly types). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { readonly exports: Record<string, unknown> };
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

let compiled: object | undefined;

type MergeExport = (
  table: number,
  k: number,
  withBase: number,
  tv: number,
  lam: number,
  scale: number,
  divisor: number,
  divide: number,
  n: number,
  sq: number,
  dots: number,
  tail: number,
  scratch: number,
) => void;

/**
 * The BF16 merge of kernel-simd.wat: one fused pass (decode, sum, scale, round, diagnostics) over
 * buffers in its own memory, so reads land where it computes and nothing is copied. The memory is
 * sized once by {@link allocate}: growing it later would detach the views handed out.
 */
export class SimdMergeKernel {
  private readonly memory: WasmMemory;
  private readonly merge: MergeExport;
  private readonly table = 0;
  private readonly sq: number;
  private readonly dots: number;
  private readonly tail: number;
  private readonly scratch: number;
  private readonly heap: number;
  private allocated = false;

  constructor(private readonly experts: number) {
    compiled ??= new wasm.Module(Buffer.from(KERNEL_SIMD_WASM_BASE64, "base64"));
    const instance = new wasm.Instance(compiled, {});
    this.memory = instance.exports.memory as WasmMemory;
    this.merge = instance.exports.merge as MergeExport;
    const pairs = (experts * (experts - 1)) / 2;
    this.sq = align16(4 * (experts + 2));
    this.dots = this.sq + 16 * experts;
    this.tail = this.dots + 16 * pairs;
    this.scratch = this.tail + 32;
    this.heap = this.scratch + 64 * experts;
  }

  /** Whether `count` buffers of `bytes` fit in one WebAssembly memory (at most 4 GiB). */
  fits(count: number, bytes: number, maxBytes = MAX_MEMORY_BYTES): boolean {
    return this.heap + count * align16(bytes) <= maxBytes;
  }

  /** `count` zeroed buffers of `bytes` each in the kernel's memory; once per kernel. */
  allocate(count: number, bytes: number): Uint8Array[] {
    if (this.allocated) throw new Error("SimdMergeKernel.allocate: the buffers are allocated once");
    this.allocated = true;
    const stride = align16(bytes);
    const end = this.heap + count * stride;
    const pages = Math.ceil(end / PAGE) - this.memory.buffer.byteLength / PAGE;
    if (pages > 0) this.memory.grow(pages);
    const { buffer } = this.memory;
    return Array.from({ length: count }, (_, i) => new Uint8Array(buffer, this.heap + i * stride, bytes));
  }

  /** Whether the kernel can work on these bytes in place. */
  owns(bytes: Uint8Array): boolean {
    return bytes.buffer === this.memory.buffer;
  }

  /** Merges `count` (a multiple of {@link SIMD_STEP}) BF16 elements; every array must be {@link owns owned}. */
  run(mode: MergeMode, lam: number, { experts, base, count, out }: ChunkBytes, stats: TensorStats): void {
    const { buffer } = this.memory;
    const k = this.experts;
    const table = new Uint32Array(buffer, this.table, k + 2);
    experts.forEach((e, i) => {
      table[i] = e.byteOffset;
    });
    table[k] = base?.byteOffset ?? 0;
    table[k + 1] = out.byteOffset;
    const sums = new Float64Array(buffer, this.sq, (this.scratch - this.sq) / 8);
    sums.fill(0);
    // Mirrors the scalar kernel: no division of a single expert, no scaling of a sum by lam = 1.
    const tv = mode === "tv";
    this.merge(
      this.table,
      k,
      base === undefined ? 0 : 1,
      tv ? 1 : 0,
      lam,
      tv && !(lam === 1 && k > 1) ? 1 : 0,
      k,
      !tv && k > 1 ? 1 : 0,
      count,
      this.sq,
      this.dots,
      this.tail,
      this.scratch,
    );
    const lanes = (offset: number, i: number) =>
      sums[(offset - this.sq) / 8 + 2 * i]! + sums[(offset - this.sq) / 8 + 2 * i + 1]!;
    for (let i = 0; i < k; i++) stats.expertSq[i]! += lanes(this.sq, i);
    for (let i = 0; i < stats.dots.length; i++) stats.dots[i]! += lanes(this.dots, i);
    stats.mergedSq += lanes(this.tail, 0);
    const nonFinite = new Int32Array(buffer, this.tail + 16, 4);
    stats.nonFinite += nonFinite[0]! + nonFinite[1]! + nonFinite[2]! + nonFinite[3]!;
  }
}
