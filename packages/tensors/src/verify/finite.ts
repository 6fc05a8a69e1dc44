import { endianness } from "node:os";
import type { DType } from "../dtypes.js";
import { dtypeSize } from "../dtypes.js";

/** The floating element types a NaN/Inf scan understands (every float dtype ckpt reads). */
export const FLOAT_DTYPES = ["F64", "F32", "F16", "BF16", "F8_E5M2", "F8_E4M3"] as const;
export type FloatDType = (typeof FLOAT_DTYPES)[number];

export function isFloatDType(dtype: DType): dtype is FloatDType {
  return (FLOAT_DTYPES as readonly string[]).includes(dtype);
}

/** What a scan found in one tensor. `firstIndex` is the element index of the first non-finite value, -1 if none. */
export interface NonFiniteCount {
  readonly elements: number;
  readonly nan: number;
  readonly posInf: number;
  readonly negInf: number;
  readonly firstIndex: number;
}

/**
 * Per dtype, as bit masks over the little-endian element (read as an unsigned integer of its
 * width; F64 by its high word): `exp` is the all-ones exponent that marks NaN and infinity,
 * `mant` the mantissa bits (non-zero: NaN), `sign` the sign bit. E4M3 (the "fn" variant torch
 * and safetensors use) has no infinity: only S.1111.111 is NaN.
 */
const LAYOUT: Record<FloatDType, { exp: number; mant: number; sign: number }> = {
  F64: { exp: 0x7ff00000, mant: 0x000fffff, sign: 0x80000000 },
  F32: { exp: 0x7f800000, mant: 0x007fffff, sign: 0x80000000 },
  F16: { exp: 0x7c00, mant: 0x03ff, sign: 0x8000 },
  BF16: { exp: 0x7f80, mant: 0x007f, sign: 0x8000 },
  F8_E5M2: { exp: 0x7c, mant: 0x03, sign: 0x80 },
  F8_E4M3: { exp: 0x7f, mant: 0, sign: 0x80 },
};

// Typed-array views read the host's byte order; files are little-endian.
const HOST_LITTLE_ENDIAN = endianness() === "LE";

/**
 * Counts NaN, +Inf and -Inf in a stream of little-endian elements of one floating dtype, fed in
 * chunks of any length (a chunk may split an element; the remainder is carried). Memory stays at
 * one element plus the caller's chunk.
 */
export class NonFiniteCounter {
  private readonly layout: { exp: number; mant: number; sign: number };
  private readonly size: number;
  private readonly carry: Uint8Array;
  private carried = 0;
  private index = 0;
  private nan = 0;
  private posInf = 0;
  private negInf = 0;
  private firstIndex = -1;

  constructor(readonly dtype: FloatDType) {
    this.layout = LAYOUT[dtype];
    this.size = dtypeSize(dtype);
    this.carry = new Uint8Array(this.size);
  }

  update(bytes: Uint8Array): void {
    let at = 0;
    if (this.carried > 0) {
      const take = Math.min(this.size - this.carried, bytes.length);
      this.carry.set(bytes.subarray(0, take), this.carried);
      this.carried += take;
      at = take;
      if (this.carried < this.size) return;
      this.scan(this.carry);
      this.carried = 0;
    }
    const whole = Math.floor((bytes.length - at) / this.size) * this.size;
    if (whole > 0) this.scan(bytes.subarray(at, at + whole));
    const rest = bytes.length - at - whole;
    if (rest > 0) {
      this.carry.set(bytes.subarray(at + whole));
      this.carried = rest;
    }
  }

  /** The counts so far; `partial` is true when the stream ended inside an element. */
  result(): NonFiniteCount & { readonly partial: boolean } {
    return {
      elements: this.index,
      nan: this.nan,
      posInf: this.posInf,
      negInf: this.negInf,
      firstIndex: this.firstIndex,
      partial: this.carried > 0,
    };
  }

  private hit(index: number, nan: boolean, negative: boolean): void {
    if (this.firstIndex < 0) this.firstIndex = index;
    if (nan) this.nan++;
    else if (negative) this.negInf++;
    else this.posInf++;
  }

  /** `bytes` holds whole elements. */
  private scan(bytes: Uint8Array): void {
    const { exp, mant, sign } = this.layout;
    const count = bytes.length / this.size;
    const base = this.index;
    this.index += count;
    const aligned = HOST_LITTLE_ENDIAN && bytes.byteOffset % this.size === 0;
    const data = aligned || !HOST_LITTLE_ENDIAN ? bytes : bytes.slice();
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    switch (this.size) {
      case 1:
        for (let i = 0; i < count; i++) {
          const v = data[i]!;
          if ((v & exp) === exp)
            this.hit(base + i, this.dtype === "F8_E4M3" || (v & mant) !== 0, (v & sign) !== 0);
        }
        return;
      case 2: {
        if (HOST_LITTLE_ENDIAN) {
          const words = new Uint16Array(data.buffer, data.byteOffset, count);
          for (let i = 0; i < count; i++) {
            const v = words[i]!;
            if ((v & exp) === exp) this.hit(base + i, (v & mant) !== 0, (v & sign) !== 0);
          }
        } else {
          for (let i = 0; i < count; i++) {
            const v = view.getUint16(i * 2, true);
            if ((v & exp) === exp) this.hit(base + i, (v & mant) !== 0, (v & sign) !== 0);
          }
        }
        return;
      }
      case 4: {
        const words = HOST_LITTLE_ENDIAN ? new Uint32Array(data.buffer, data.byteOffset, count) : undefined;
        for (let i = 0; i < count; i++) {
          const v = words ? words[i]! : view.getUint32(i * 4, true);
          if ((v & exp) >>> 0 === exp) this.hit(base + i, (v & mant) !== 0, (v & sign) !== 0);
        }
        return;
      }
      default: {
        // F64: the high word (second in little-endian order) holds sign, exponent and the top of the mantissa.
        const words = HOST_LITTLE_ENDIAN
          ? new Uint32Array(data.buffer, data.byteOffset, count * 2)
          : undefined;
        for (let i = 0; i < count; i++) {
          const hi = words ? words[2 * i + 1]! : view.getUint32(i * 8 + 4, true);
          if ((hi & exp) >>> 0 === exp) {
            const lo = words ? words[2 * i]! : view.getUint32(i * 8, true);
            this.hit(base + i, (hi & mant) !== 0 || lo !== 0, (hi & sign) !== 0);
          }
        }
      }
    }
  }
}

/** Counts NaN and ±Inf in whole little-endian elements held in memory. Pure. */
export function countNonFinite(bytes: Uint8Array, dtype: FloatDType): NonFiniteCount {
  const counter = new NonFiniteCounter(dtype);
  counter.update(bytes);
  const { partial, ...counts } = counter.result();
  if (partial) {
    throw new RangeError(`${bytes.length} bytes are not a whole number of ${dtype} elements`);
  }
  return counts;
}
