import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { f32ToBf16Bytes, f32ToF16Bytes } from "../../src/convert/floats.js";
import { countNonFinite, NonFiniteCounter } from "../../src/verify/finite.js";

const u16 = (...words: number[]) => new Uint8Array(new Uint16Array(words).buffer);
const u32 = (...words: number[]) => new Uint8Array(new Uint32Array(words).buffer);
const f64 = (...values: number[]) => new Uint8Array(new Float64Array(values).buffer);

describe("countNonFinite: IEEE bit patterns", () => {
  it("BF16: +Inf 0x7f80, -Inf 0xff80, quiet and signalling NaNs; max finite, subnormal, -0 are finite", () => {
    const bytes = u16(0x3f80, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1, 0x7f7f, 0x0001, 0x8000, 0xff7f);
    expect(countNonFinite(bytes, "BF16")).toEqual({
      elements: 10,
      nan: 3,
      posInf: 1,
      negInf: 1,
      firstIndex: 1,
    });
  });

  it("F16: +Inf 0x7c00, -Inf 0xfc00, NaN 0x7e00 / 0x7c01 / 0xfe00; 65504 (0x7bff) and subnormals are finite", () => {
    const bytes = u16(0x7bff, 0x0001, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00, 0x3c00);
    expect(countNonFinite(bytes, "F16")).toEqual({
      elements: 8,
      nan: 3,
      posInf: 1,
      negInf: 1,
      firstIndex: 2,
    });
  });

  it("F32: +Inf 0x7f800000, -Inf 0xff800000, NaN 0x7fc00000 / 0x7f800001 / 0xffffffff; FLT_MAX finite", () => {
    const bytes = u32(
      0x7f7fffff,
      0x00000001,
      0x80000000,
      0x7f800000,
      0xff800000,
      0x7fc00000,
      0x7f800001,
      0xffffffff,
    );
    expect(countNonFinite(bytes, "F32")).toEqual({
      elements: 8,
      nan: 3,
      posInf: 1,
      negInf: 1,
      firstIndex: 3,
    });
  });

  it("F64: infinities and NaN (including a NaN whose only set mantissa bit is in the low word)", () => {
    const nanLowBit = new Uint8Array(8);
    new DataView(nanLowBit.buffer).setUint32(0, 1, true);
    new DataView(nanLowBit.buffer).setUint32(4, 0x7ff00000, true);
    const bytes = new Uint8Array([
      ...f64(1.5, Number.MAX_VALUE, Infinity, -Infinity, Number.NaN),
      ...nanLowBit,
    ]);
    expect(countNonFinite(bytes, "F64")).toEqual({
      elements: 6,
      nan: 2,
      posInf: 1,
      negInf: 1,
      firstIndex: 2,
    });
  });

  it("F8: E5M2 has infinities (0x7c, 0xfc) and NaNs (0x7d..0x7f); E4M3fn only NaN (0x7f, 0xff), 0x7e is finite 448", () => {
    expect(countNonFinite(new Uint8Array([0x7b, 0x7c, 0xfc, 0x7d, 0xff]), "F8_E5M2")).toEqual({
      elements: 5,
      nan: 2,
      posInf: 1,
      negInf: 1,
      firstIndex: 1,
    });
    expect(countNonFinite(new Uint8Array([0x7e, 0x78, 0x7f, 0xff]), "F8_E4M3")).toEqual({
      elements: 4,
      nan: 2,
      posInf: 0,
      negInf: 0,
      firstIndex: 2,
    });
  });

  it("agrees with the conversions: converting NaN/±Inf to BF16 and F16 yields what the scan flags", () => {
    const values = new Float32Array([1, Number.NaN, Infinity, -Infinity, 65504, -0]);
    for (const [dtype, convert] of [
      ["BF16", f32ToBf16Bytes],
      ["F16", f32ToF16Bytes],
    ] as const) {
      const bytes = new Uint8Array(values.length * 2);
      convert(values, bytes);
      expect(countNonFinite(bytes, dtype)).toEqual({
        elements: 6,
        nan: 1,
        posInf: 1,
        negInf: 1,
        firstIndex: 1,
      });
    }
  });

  it("refuses a byte count that is not a whole number of elements", () => {
    expect(() => countNonFinite(new Uint8Array(3), "F32")).toThrow(/not a whole number of F32 elements/);
  });
});

describe("NonFiniteCounter: streaming", () => {
  it("counts the same however the bytes are split, even mid-element and at odd offsets", () => {
    const values = new Float32Array(257).map((_, i) =>
      i % 37 === 5 ? Number.NaN : i % 53 === 7 ? -Infinity : i,
    );
    const bytes = new Uint8Array(values.buffer);
    const whole = countNonFinite(bytes, "F32");
    expect(whole.nan + whole.negInf).toBeGreaterThan(5);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 40 }), (sizes) => {
        const counter = new NonFiniteCounter("F32");
        let at = 0;
        for (let i = 0; at < bytes.length; i++) {
          const n = sizes[i % sizes.length]!;
          // Copy into a buffer shifted by one byte so typed views cannot be used directly.
          const shifted = new Uint8Array(n + 1);
          shifted.set(bytes.subarray(at, at + n), 1);
          counter.update(shifted.subarray(1, 1 + Math.min(n, bytes.length - at)));
          at += n;
        }
        const { partial, ...counts } = counter.result();
        expect(partial).toBe(false);
        expect(counts).toEqual(whole);
      }),
    );
  });

  it("reports a stream that ended inside an element as partial", () => {
    const counter = new NonFiniteCounter("BF16");
    counter.update(new Uint8Array([0x80, 0x7f, 0x00]));
    expect(counter.result()).toMatchObject({ elements: 1, posInf: 1, partial: true });
  });
});
