import { type DType, dtypeSize, f32ToBf16Bytes, f32ToF16Bytes, toFloat32 } from "@ckpt/tensors";
import type { MergeMode } from "../request.js";
import { SIMD_STEP, SimdMergeKernel } from "./kernel-simd.js";

/**
 * Elements per inner block: every F32 scratch array of a block (experts, base, accumulator, merged)
 * stays in the core's L2 cache while each pass of the block runs over it.
 */
export const BLOCK_ELEMENTS = 8192;

/** Running sums of one tensor's diagnostics, in double precision, in a fixed order (reproducible). */
export interface TensorStats {
  /** Σ (expertₖ − reference)² per expert: the task vector with a base, the deviation from the merge without. */
  readonly expertSq: Float64Array;
  /** Σ τᵢ·τⱼ for i < j, row by row (with a base only). */
  readonly dots: Float64Array;
  /** Σ (merged − base)² of the values written (with a base only). */
  mergedSq: number;
  /** Merged values that are NaN or infinite. */
  nonFinite: number;
}

/** The raw little-endian bytes of one stretch of a tensor: each input's, and where the merged bytes go. */
export interface ChunkBytes {
  readonly experts: readonly Uint8Array[];
  readonly base: Uint8Array | undefined;
  /** In elements. */
  readonly count: number;
  readonly out: Uint8Array;
}

export function emptyStats(experts: number): TensorStats {
  return {
    expertSq: new Float64Array(experts),
    dots: new Float64Array((experts * (experts - 1)) / 2),
    mergedSq: 0,
    nonFinite: 0,
  };
}

/**
 * The arithmetic of a merge, exactly as a PyTorch reference does it element by element, each
 * operation rounded to F32 (a JS double operation on two F32 values, stored into a Float32Array,
 * is the correctly rounded F32 result: 53 ≥ 2·24 + 2 bits):
 *   avg: acc = x₀; acc += xₖ (k = 1, 2, … in order); acc = acc / n
 *   tv:  τₖ = xₖ − b; acc = τ₀; acc += τₖ (in order); acc = b + f32(f32(lam) · acc)
 * and one round-to-nearest-even to the output dtype at the end.
 */
export class MergeKernel {
  private readonly xs: Float32Array[];
  private readonly acc = new Float32Array(BLOCK_ELEMENTS);
  private readonly base = new Float32Array(BLOCK_ELEMENTS);
  private readonly merged = new Float32Array(BLOCK_ELEMENTS);
  private readonly mergedBits = new Uint32Array(this.merged.buffer);
  private readonly lam: number;
  /** The BF16 fast path (WebAssembly SIMD), same arithmetic; absent when disabled. */
  private readonly simd: SimdMergeKernel | undefined;

  constructor(
    readonly mode: MergeMode,
    readonly experts: number,
    readonly withBase: boolean,
    lam: number | null,
    options: { readonly simd?: boolean } = {},
  ) {
    this.xs = Array.from({ length: experts }, () => new Float32Array(BLOCK_ELEMENTS));
    // torch multiplies an F32 tensor by a Python float in F32: the scalar is rounded first.
    this.lam = Math.fround(lam ?? 1);
    this.simd = options.simd === false ? undefined : new SimdMergeKernel(experts);
  }

  /**
   * `count` zeroed buffers of `bytes` each that the kernel merges in place (no copy); allocated
   * once per kernel. Slots too many for the SIMD kernel's memory (hundreds of experts) are plain
   * buffers instead, merged by the scalar path: slower, same bits.
   */
  allocate(count: number, bytes: number, maxSimdBytes?: number): Uint8Array[] {
    if (this.simd === undefined || !this.simd.fits(count, bytes, maxSimdBytes))
      return Array.from({ length: count }, () => new Uint8Array(bytes));
    return this.simd.allocate(count, bytes);
  }

  /**
   * Merges `count` elements of one tensor: `experts[k]` and `base` hold their raw little-endian
   * bytes (all `dtype`), `out` receives the merged bytes; `stats` accumulates the diagnostics.
   */
  run(
    dtype: DType,
    experts: readonly Uint8Array[],
    base: Uint8Array | undefined,
    count: number,
    out: Uint8Array,
    stats: TensorStats,
  ): void {
    const simd = this.simd;
    const inPlace =
      simd !== undefined &&
      dtype === "BF16" &&
      simd.owns(out) &&
      experts.every((e) => simd.owns(e)) &&
      (base === undefined || simd.owns(base));
    // The SIMD kernel takes whole steps; the few elements after the last one go the scalar way.
    const fast = inPlace ? count - (count % SIMD_STEP) : 0;
    if (fast > 0) simd!.run(this.mode, this.lam, { experts, base, count: fast, out }, stats);
    if (fast === count) return;
    const from = fast * dtypeSize(dtype);
    const rest = {
      experts: experts.map((e) => e.subarray(from)),
      base: base?.subarray(from),
      count: count - fast,
      out: out.subarray(from),
    };
    this.runScalar(dtype, rest, stats);
  }

  private runScalar(dtype: DType, { experts, base, count, out }: ChunkBytes, stats: TensorStats): void {
    const size = dtypeSize(dtype);
    for (let start = 0; start < count; start += BLOCK_ELEMENTS) {
      const n = Math.min(BLOCK_ELEMENTS, count - start);
      const from = start * size;
      const to = from + n * size;
      for (let k = 0; k < this.experts; k++)
        toFloat32(experts[k]!.subarray(from, to), dtype, this.xs[k]!.subarray(0, n));
      if (base !== undefined) toFloat32(base.subarray(from, to), dtype, this.base.subarray(0, n));
      // tv sums task vectors; avg sums the experts themselves and, with a base, describes task vectors after.
      if (this.mode === "tv") this.subtractBase(n, stats);
      if (this.mode === "avg") this.average(n);
      else this.taskVectors(n);
      if (this.mode === "avg" && base !== undefined) this.subtractBase(n, stats);
      encode(this.acc.subarray(0, n), dtype, out.subarray(from, to));
      // The values as written (rounded to the output dtype) are what the diagnostics describe.
      toFloat32(out.subarray(from, to), dtype, this.merged.subarray(0, n));
      this.accumulateStats(n, stats);
    }
  }

  private average(n: number): void {
    const { acc, xs } = this;
    const last = xs.length - 1;
    acc.set(xs[0]!.subarray(0, n));
    for (let k = 1; k < last; k++) {
      const x = xs[k]!;
      for (let i = 0; i < n; i++) acc[i] = acc[i]! + x[i]!;
    }
    if (last === 0) return;
    // The last sum and the division in one pass: the sum is rounded to F32 before dividing.
    const x = xs[last]!;
    const divisor = xs.length;
    for (let i = 0; i < n; i++) acc[i] = Math.fround(acc[i]! + x[i]!) / divisor;
  }

  private taskVectors(n: number): void {
    const { acc, xs, base, lam } = this;
    const last = xs.length - 1;
    acc.set(xs[0]!.subarray(0, n));
    for (let k = 1; k < last; k++) {
      const x = xs[k]!;
      for (let i = 0; i < n; i++) acc[i] = acc[i]! + x[i]!;
    }
    // The last sum, the scaling and the base in one pass, each step rounded to F32.
    const x = last === 0 ? undefined : xs[last];
    if (x === undefined) {
      for (let i = 0; i < n; i++) acc[i] = base[i]! + Math.fround(lam * acc[i]!);
    } else if (lam === 1) {
      for (let i = 0; i < n; i++) acc[i] = base[i]! + Math.fround(acc[i]! + x[i]!);
    } else {
      for (let i = 0; i < n; i++) acc[i] = base[i]! + Math.fround(lam * Math.fround(acc[i]! + x[i]!));
    }
  }

  /** τₖ = xₖ − b in place (rounded to F32, as torch's subtraction), adding Σ τₖ² to the stats on the way. */
  private subtractBase(n: number, stats: TensorStats): void {
    const { base } = this;
    this.xs.forEach((x, k) => {
      let sq = 0;
      for (let i = 0; i < n; i++) {
        const t = Math.fround(x[i]! - base[i]!);
        x[i] = t;
        sq += t * t;
      }
      stats.expertSq[k]! += sq;
    });
  }

  private accumulateStats(n: number, stats: TensorStats): void {
    const { xs, merged, base } = this;
    const bits = this.mergedBits;
    let nonFinite = 0;
    for (let i = 0; i < n; i++) if ((bits[i]! & 0x7f800000) === 0x7f800000) nonFinite++;
    stats.nonFinite += nonFinite;
    if (this.withBase) {
      let pair = 0;
      for (let j = 0; j < xs.length; j++) {
        const a = xs[j]!;
        for (let k = j + 1; k < xs.length; k++) {
          const b = xs[k]!;
          let dot = 0;
          for (let i = 0; i < n; i++) dot += a[i]! * b[i]!;
          stats.dots[pair++]! += dot;
        }
      }
      let sq = 0;
      for (let i = 0; i < n; i++) {
        const d = merged[i]! - base[i]!;
        sq += d * d;
      }
      stats.mergedSq += sq;
      return;
    }
    for (let k = 0; k < xs.length; k++) {
      const x = xs[k]!;
      let sq = 0;
      for (let i = 0; i < n; i++) {
        const d = x[i]! - merged[i]!;
        sq += d * d;
      }
      stats.expertSq[k]! += sq;
    }
  }
}

function encode(values: Float32Array, dtype: DType, out: Uint8Array): void {
  if (dtype === "BF16") f32ToBf16Bytes(values, out);
  else if (dtype === "F16") f32ToF16Bytes(values, out);
  else out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
}
