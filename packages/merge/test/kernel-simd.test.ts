import { readFile } from "node:fs/promises";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a build script in plain JavaScript, without types
import { GENERATED_PATH, generateMergeKernel } from "../../../tools/wasm/build-merge-kernel.mjs";
import { emptyStats, MergeKernel, type TensorStats } from "../src/internal/kernel.js";

/** BF16 bit patterns weighted towards the edges: ±0, subnormals, ±Inf, NaNs of both signs, the largest finite. */
const bf16Bits = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 0xffff }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      0x0000,
      0x8000,
      0x0001,
      0x807f,
      0x7f80,
      0xff80,
      0x7fc0,
      0xffc1,
      0x7f81,
      0x7f7f,
    ),
  },
);

interface Case {
  mode: "avg" | "tv";
  withBase: boolean;
  lam: number | null;
  inputs: number[][];
}

function merge(c: Case, simd: boolean): { out: Uint8Array; stats: TensorStats } {
  const experts = c.withBase ? c.inputs.length - 1 : c.inputs.length;
  const count = c.inputs[0]!.length;
  const kernel = new MergeKernel(c.mode, experts, c.withBase, c.lam, { simd });
  const buffers = kernel.allocate(c.inputs.length + 1, 2 * count);
  c.inputs.forEach((values, i) => {
    new Uint16Array(buffers[i]!.buffer, buffers[i]!.byteOffset, count).set(values);
  });
  const out = buffers[c.inputs.length]!;
  const stats = emptyStats(experts);
  kernel.run("BF16", buffers.slice(0, experts), c.withBase ? buffers[experts] : undefined, count, out, stats);
  return { out, stats };
}

/**
 * The output's bit patterns, every NaN as one value: when two NaNs meet, which one's payload an
 * addition keeps depends on operand order, which V8 may swap in scalar code (torch writes 0xFFFF
 * for any NaN anyway, see docs/merge.md).
 */
const comparable = (out: Uint8Array) =>
  Array.from(new Uint16Array(out.buffer, out.byteOffset, out.length / 2), (v) =>
    (v & 0x7fff) > 0x7f80 ? "NaN" : v,
  );

/** Equal up to the summation order of the diagnostics (lane-wise partial sums in the SIMD kernel). */
function expectClose(a: Float64Array | number[], b: Float64Array | number[]): void {
  expect(a.length).toBe(b.length);
  a.forEach((x, i) => {
    const y = b[i]!;
    if (!Number.isFinite(x) || !Number.isFinite(y)) expect(x).toBe(y);
    else expect(Math.abs(x - y)).toBeLessThanOrEqual(1e-12 * Math.max(Math.abs(x), Math.abs(y)));
  });
}

describe("the WebAssembly SIMD kernel", () => {
  it("is generated from the current kernel-simd.wat (run node tools/wasm/build-merge-kernel.mjs)", async () => {
    expect(await readFile(GENERATED_PATH, "utf8")).toBe(await generateMergeKernel());
  });

  it("writes the same bits and diagnostics as the scalar kernel, with NaN, Inf, -0 and subnormal inputs", () => {
    const arbitraryCase = fc
      .record({
        mode: fc.constantFrom("avg" as const, "tv" as const),
        withBase: fc.boolean(),
        lam: fc.constantFrom(null, 1, 0.3, -2.5, 1e-3),
        experts: fc.integer({ min: 1, max: 4 }),
        count: fc.integer({ min: 0, max: 70 }),
      })
      .chain(({ mode, withBase, lam, experts, count }) => {
        const base = mode === "tv" || withBase;
        return fc.record({
          mode: fc.constant(mode),
          withBase: fc.constant(base),
          lam: fc.constant(mode === "tv" ? lam : null),
          inputs: fc.array(fc.array(bf16Bits, { minLength: count, maxLength: count }), {
            minLength: experts + (base ? 1 : 0),
            maxLength: experts + (base ? 1 : 0),
          }),
        });
      });
    fc.assert(
      fc.property(arbitraryCase, (c) => {
        const fast = merge(c, true);
        const scalar = merge(c, false);
        expect(comparable(fast.out)).toEqual(comparable(scalar.out));
        expect(fast.stats.nonFinite).toBe(scalar.stats.nonFinite);
        expectClose(fast.stats.expertSq, scalar.stats.expertSq);
        expectClose(fast.stats.dots, scalar.stats.dots);
        expectClose([fast.stats.mergedSq], [scalar.stats.mergedSq]);
      }),
      { numRuns: 400 },
    );
  });

  it("merges buffers outside its memory through the scalar path, with the same result", () => {
    const kernel = new MergeKernel("avg", 2, false, null);
    const a = Uint8Array.from([0x80, 0x3f, 0x00, 0x40]); // 1, 2
    const b = Uint8Array.from([0x40, 0x40, 0x80, 0x40]); // 3, 4
    const out = new Uint8Array(4);
    kernel.run("BF16", [a, b], undefined, 2, out, emptyStats(2));
    expect(Array.from(out)).toEqual([0x00, 0x40, 0x40, 0x40]); // 2, 3
  });

  it("gives slots that would overflow its memory as plain buffers, merged the scalar way", () => {
    const kernel = new MergeKernel("avg", 2, false, null);
    // A memory limit of 64 KiB stands in for the 4 GiB that hundreds of experts would need.
    const [a, b, out] = kernel.allocate(3, 32 * 1024, 64 * 1024);
    expect(a!.buffer).not.toBe(b!.buffer); // separate buffers, not views into one memory
    a!.set([0x80, 0x3f, 0x00, 0x40]); // 1, 2
    b!.set([0x40, 0x40, 0x80, 0x40]); // 3, 4
    kernel.run("BF16", [a!, b!], undefined, 16, out!, emptyStats(2));
    expect(Array.from(out!.subarray(0, 4))).toEqual([0x00, 0x40, 0x40, 0x40]); // 2, 3
    // The same request inside the limit is served from the kernel's own memory.
    const inside = new MergeKernel("avg", 2, false, null).allocate(3, 32 * 1024);
    expect(inside[0]!.buffer).toBe(inside[1]!.buffer);
  });
});
