import { bf16BytesToF32, f32ToBf16Bytes } from "@ckpt/tensors";
import { describe, expect, it } from "vitest";
import { BLOCK_ELEMENTS, emptyStats, MergeKernel } from "../src/internal/kernel.js";

const bf16 = (...values: number[]) => {
  const out = new Uint8Array(values.length * 2);
  f32ToBf16Bytes(Float32Array.from(values), out);
  return out;
};
const bits = (bytes: Uint8Array) =>
  Array.from(new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2));
const values = (bytes: Uint8Array) => {
  const out = new Float32Array(bytes.length / 2);
  bf16BytesToF32(bytes, out);
  return Array.from(out);
};

function run(mode: "avg" | "tv", experts: Uint8Array[], base?: Uint8Array, lam: number | null = null) {
  const kernel = new MergeKernel(mode, experts.length, base !== undefined, lam);
  const out = new Uint8Array(experts[0]!.length);
  const stats = emptyStats(experts.length);
  kernel.run("BF16", experts, base, experts[0]!.length / 2, out, stats);
  return { out, stats };
}

describe("MergeKernel arithmetic (BF16)", () => {
  it("rounds the F32 average once, to nearest even at a tie", () => {
    // 1 and 1 + 2^-7 are neighbours in BF16: their mean is a tie and goes to the even one (1);
    // 1 + 2^-7 and 1 + 2^-6: the tie goes to 1 + 2^-6 (even mantissa).
    const { out } = run("avg", [bf16(1, 1.0078125), bf16(1.0078125, 1.015625)]);
    expect(values(out)).toEqual([1, 1.015625]);
  });

  it("keeps -0 when every expert is -0 (a fold from the first expert, not from +0)", () => {
    const { out } = run("avg", [bf16(-0, 0), bf16(-0, -0), bf16(-0, -0)]);
    expect(bits(out)).toEqual([0x8000, 0x0000]);
  });

  it("overflows to infinity in F32 as torch does, and counts it", () => {
    const max = 3.3895313892515355e38; // largest finite BF16
    const { out, stats } = run("avg", [bf16(max, -max), bf16(max, -max), bf16(max, -max)]);
    expect(values(out)).toEqual([Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]);
    expect(stats.nonFinite).toBe(2);
  });

  it("keeps subnormals (no flush to zero)", () => {
    const tiny = 2 ** -133; // a BF16 subnormal
    const { out } = run("avg", [bf16(tiny), bf16(tiny)]);
    expect(values(out)).toEqual([tiny]);
  });

  it("tv rounds lam to F32 and the product before adding the base", () => {
    // 1 + f32(f32(0.1) × 0.5) = 1.05 → 1.046875 in BF16 (spacing 2^-7); 2 + 0.1 → 2.09375 (spacing 2^-6).
    const { out } = run("tv", [bf16(1.5, 3)], bf16(1, 2), 0.1);
    expect(values(out)).toEqual([1.046875, 2.09375]);
  });

  it("tv sums each expert's difference from the base, then scales", () => {
    const { out, stats } = run("tv", [bf16(3, 1), bf16(5, 1)], bf16(1, 1), 0.5);
    expect(values(out)).toEqual([1 + 0.5 * (2 + 4), 1]);
    expect(Array.from(stats.expertSq)).toEqual([4, 16]);
    expect(Array.from(stats.dots)).toEqual([8]);
    expect(stats.mergedSq).toBe(9); // (4 - 1)²
  });

  it("merges tensors longer than one block the same as piece by piece", () => {
    const n = BLOCK_ELEMENTS * 2 + 3;
    const a = Array.from({ length: n }, (_, i) => (i % 97) / 7);
    const b = Array.from({ length: n }, (_, i) => -(i % 13) / 3);
    const whole = run("avg", [bf16(...a), bf16(...b)]).out;
    const cuts = [0, 5, BLOCK_ELEMENTS + 1, n];
    const pieces = cuts
      .slice(1)
      .map((end, k) => run("avg", [bf16(...a.slice(cuts[k], end)), bf16(...b.slice(cuts[k], end))]).out);
    expect(Buffer.from(whole)).toEqual(Buffer.concat(pieces));
  });
});
