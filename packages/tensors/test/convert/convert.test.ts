// @module-tag torch
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { TORCH_PYTHON } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import {
  accumulateScaledInto,
  bf16BytesToF32,
  type DType,
  f16BytesToF32,
  f32ToBf16Bytes,
  f32ToF16Bytes,
  toFloat32,
  TensorsError,
} from "../../src/index.js";

interface Reference {
  f32: number[];
  f32ToBf16: number[];
  f32ToF16: number[];
  f16ToF32: number[];
  bf16ToF32: number[];
  i64: string[];
  i64ToF32: number[];
}

// python3-torch is a declared test dependency: if it is missing this throws and the suite fails.
// Computed in a hook, not at import, so the fast lane (which skips this file) starts no Python.
let reference: Reference;
beforeAll(() => {
  reference = JSON.parse(
    execFileSync(TORCH_PYTHON, [join(import.meta.dirname, "torch_reference.py")], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    }),
  ) as Reference;
});

const isF32NaN = (bits: number) => (bits & 0x7fffffff) > 0x7f800000;
const isHalfNaN = (bits: number, exponentMask: number) =>
  (bits & exponentMask) === exponentMask && (bits & (0x7fff & ~exponentMask)) !== 0;

function bytesOfU16(values: readonly number[]): Uint8Array {
  return new Uint8Array(Uint16Array.from(values).buffer);
}

/** Mismatches between ours and torch's, as hex strings, NaN compared as "a quiet NaN of the same sign". */
function compare16(
  input: number[],
  ours: Uint16Array,
  theirs: number[],
  exponentMask: number,
  quietBit: number,
) {
  const bad: string[] = [];
  input.forEach((bits, i) => {
    const a = ours[i]!;
    const b = theirs[i]!;
    if (isF32NaN(bits)) {
      const ok =
        isHalfNaN(a, exponentMask) &&
        (a & quietBit) !== 0 &&
        a >>> 15 === bits >>> 31 &&
        isHalfNaN(b, exponentMask);
      if (!ok) bad.push(`${bits.toString(16)}: ours ${a.toString(16)} torch ${b.toString(16)}`);
    } else if (a !== b) {
      bad.push(`${bits.toString(16)}: ours ${a.toString(16)} torch ${b.toString(16)}`);
    }
  });
  return bad;
}

describe("dtype conversion against torch", () => {
  let input: Float32Array;
  beforeAll(() => {
    input = new Float32Array(new Uint32Array(reference.f32).buffer);
  });

  it("F32 -> BF16 rounds to nearest even like torch; NaN stays a quiet NaN with its sign", () => {
    const out = new Uint8Array(input.length * 2);
    f32ToBf16Bytes(input, out);
    expect(
      compare16(reference.f32, new Uint16Array(out.buffer), reference.f32ToBf16, 0x7f80, 0x0040),
    ).toEqual([]);
  });

  it("F32 -> BF16 into an unaligned byte view gives the same bytes as into an aligned one", () => {
    const aligned = new Uint8Array(input.length * 2);
    f32ToBf16Bytes(input, aligned);
    const backing = new Uint8Array(input.length * 2 + 1);
    const unaligned = backing.subarray(1);
    f32ToBf16Bytes(input, unaligned);
    expect(Buffer.from(unaligned).equals(Buffer.from(aligned))).toBe(true);
  });

  it("F32 -> F16 rounds to nearest even like torch, subnormals and overflow included", () => {
    const out = new Uint8Array(input.length * 2);
    f32ToF16Bytes(input, out);
    expect(compare16(reference.f32, new Uint16Array(out.buffer), reference.f32ToF16, 0x7c00, 0x0200)).toEqual(
      [],
    );
  });

  it("F16 -> F32 matches torch bit for bit on all 65536 patterns (NaN payloads kept, made quiet)", () => {
    const all = bytesOfU16(Array.from({ length: 65536 }, (_, i) => i));
    const out = new Float32Array(65536);
    f16BytesToF32(all, out);
    expect(Array.from(new Uint32Array(out.buffer))).toEqual(reference.f16ToF32);
  });

  it("BF16 -> F32 matches torch bit for bit on all 65536 patterns", () => {
    const all = bytesOfU16(Array.from({ length: 65536 }, (_, i) => i));
    const out = new Float32Array(65536);
    bf16BytesToF32(all, out);
    expect(Array.from(new Uint32Array(out.buffer))).toEqual(reference.bf16ToF32);
  });

  it("decodes unaligned byte views the same as aligned ones", () => {
    const aligned = bytesOfU16([0x3c00, 0xfc00, 0x0001, 0x7e01]);
    const shifted = new Uint8Array(aligned.length + 1);
    shifted.set(aligned, 1);
    for (const decode of [f16BytesToF32, bf16BytesToF32]) {
      const a = new Float32Array(4);
      const b = new Float32Array(4);
      decode(aligned, a);
      decode(shifted.subarray(1), b);
      expect(new Uint32Array(b.buffer)).toEqual(new Uint32Array(a.buffer));
    }
  });

  it("I64 -> F32 is correctly rounded like torch (no double rounding at midpoints)", () => {
    const src = new Uint8Array(reference.i64.length * 8);
    const view = new DataView(src.buffer);
    reference.i64.forEach((v, i) => {
      view.setBigInt64(8 * i, BigInt(v), true);
    });
    const out = new Float32Array(reference.i64.length);
    toFloat32(src, "I64", out);
    expect(Array.from(new Uint32Array(out.buffer))).toEqual(reference.i64ToF32);
  });
});

describe("toFloat32 and accumulateScaledInto", () => {
  function bytes(dtype: DType, values: number[]): Uint8Array {
    const arrays: Partial<Record<DType, (v: number[]) => ArrayBufferView>> = {
      F64: (v) => Float64Array.from(v),
      F32: (v) => Float32Array.from(v),
      I32: (v) => Int32Array.from(v),
      U32: (v) => Uint32Array.from(v),
      I16: (v) => Int16Array.from(v),
      U16: (v) => Uint16Array.from(v),
      I8: (v) => Int8Array.from(v),
      U8: (v) => Uint8Array.from(v),
      BOOL: (v) => Uint8Array.from(v),
      U64: (v) => BigUint64Array.from(v.map(BigInt)),
    };
    const a = arrays[dtype]!(values);
    return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  }

  it.each([
    ["F64", [1.5, -2.25, 1e300], [1.5, -2.25, Number.POSITIVE_INFINITY]],
    ["F32", [1.5, -2.25, 3], [1.5, -2.25, 3]],
    ["I32", [-7, 2 ** 31 - 1, 0], [-7, 2 ** 31, 0]],
    ["U32", [7, 2 ** 32 - 1, 0], [7, 2 ** 32, 0]],
    ["I16", [-32768, 32767, 1], [-32768, 32767, 1]],
    ["U16", [65535, 0, 1], [65535, 0, 1]],
    ["I8", [-128, 127, 0], [-128, 127, 0]],
    ["U8", [255, 0, 1], [255, 0, 1]],
    ["BOOL", [0, 1, 7], [0, 1, 1]],
    ["U64", [2 ** 53, 1, 0], [2 ** 53, 1, 0]],
  ] as const)("decodes %s", (dtype, values, expected) => {
    const out = new Float32Array(3);
    toFloat32(bytes(dtype, [...values]), dtype, out);
    expect(Array.from(out)).toEqual(expected);
  });

  it("decodes F8_E4M3 and F8_E5M2", () => {
    const out = new Float32Array(4);
    toFloat32(Uint8Array.from([0x38, 0xb8, 0x7f, 0x01]), "F8_E4M3", out);
    expect(Array.from(out)).toEqual([1, -1, Number.NaN, 2 ** -9]);
    toFloat32(Uint8Array.from([0x3c, 0xbc, 0x7c, 0x01]), "F8_E5M2", out);
    expect(Array.from(out)).toEqual([1, -1, Number.POSITIVE_INFINITY, 2 ** -16]);
  });

  it("accumulates scaled BF16 and F32 tensors across chunk boundaries", () => {
    const n = 70000; // more than one internal chunk
    const src = new Float32Array(n).map((_, i) => (i % 13) - 6);
    const bf16 = new Uint8Array(n * 2);
    f32ToBf16Bytes(src, bf16);
    const acc = new Float32Array(n).fill(1);
    accumulateScaledInto(acc, bf16, "BF16", 0.5);
    accumulateScaledInto(acc, new Uint8Array(src.buffer), "F32", 0.25);
    expect(acc[0]).toBe(1 + 0.75 * -6);
    expect(acc[n - 1]).toBe(1 + 0.75 * (((n - 1) % 13) - 6));
    expect(acc.every((v, i) => v === 1 + 0.75 * ((i % 13) - 6))).toBe(true);
  });

  it.each(["F4", "F6_E2M3", "F6_E3M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "C64", "C128"] as const)(
    "refuses to decode %s, naming it",
    (dtype) => {
      const refuse = (fn: () => void) =>
        expect(fn).toThrow(
          expect.objectContaining({
            code: "CONVERT_DTYPE_UNSUPPORTED",
            message: expect.stringContaining(dtype),
          }),
        );
      refuse(() => toFloat32(new Uint8Array(16), dtype, new Float32Array(64)));
      refuse(() => accumulateScaledInto(new Float32Array(64), new Uint8Array(16), dtype, 1));
    },
  );

  it("refuses mismatched lengths and non-finite scales with named errors", () => {
    expect(() => toFloat32(new Uint8Array(3), "F16", new Float32Array(2))).toThrow(
      expect.objectContaining({ code: "CONVERT_BAD_LENGTH" }),
    );
    expect(() => toFloat32(new Uint8Array(8), "F32", new Float32Array(1))).toThrow(
      expect.objectContaining({ code: "CONVERT_BUFFER_TOO_SMALL" }),
    );
    expect(() => bf16BytesToF32(new Uint8Array(5), new Float32Array(4))).toThrow(TensorsError);
    expect(() => f32ToF16Bytes(new Float32Array(2), new Uint8Array(3))).toThrow(
      expect.objectContaining({ code: "CONVERT_BUFFER_TOO_SMALL" }),
    );
    expect(() => accumulateScaledInto(new Float32Array(1), new Uint8Array(4), "F32", Number.NaN)).toThrow(
      expect.objectContaining({ code: "CONVERT_BAD_SCALE" }),
    );
  });
});
