import { describe, expect, it } from "vitest";
import { DTYPE_BITS, type DType, dtypeSize, isSubByteDType, packedByteLength } from "../src/index.js";

describe("dtype sizes", () => {
  it("packs F4 and F6 below a byte: whole bytes or undefined, exact for any safe count", () => {
    expect(packedByteLength("F4", 2)).toBe(1);
    expect(packedByteLength("F4", 3)).toBeUndefined();
    expect(packedByteLength("F6_E2M3", 4)).toBe(3);
    expect(packedByteLength("F6_E3M2", 2)).toBeUndefined();
    expect(packedByteLength("F6_E3M2", 6)).toBeUndefined();
    expect(packedByteLength("F6_E3M2", 0)).toBe(0);
    expect(packedByteLength("F4", 2 ** 53 - 2)).toBe(2 ** 52 - 1);
    expect(packedByteLength("F6_E2M3", 2 ** 53 - 4)).toBe(((2 ** 53 - 8) / 8) * 6 + 3);
    expect(packedByteLength("BF16", 3)).toBe(6);
  });

  it("knows the 22 safetensors 0.8 dtypes plus torch's C128, and which are packed", () => {
    expect(Object.keys(DTYPE_BITS)).toHaveLength(23);
    const packed = (Object.keys(DTYPE_BITS) as DType[]).filter(isSubByteDType);
    expect(packed.sort()).toEqual(["F4", "F6_E2M3", "F6_E3M2"]);
    expect(dtypeSize("F8_E8M0")).toBe(1);
    expect(dtypeSize("F4")).toBe(0.5);
  });
});
