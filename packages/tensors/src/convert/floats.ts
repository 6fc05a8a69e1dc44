import { TensorsError } from "../errors.js";

/**
 * Bit-level conversions between F32, BF16 and F16. Every function writes into a caller buffer and
 * allocates nothing per element. Raw tensor bytes are little-endian (safetensors and torch.save
 * both store little-endian); a byte view may start at any offset, so 16-bit reads go through
 * bytes unless the view happens to be aligned.
 *
 * F32 results are written as bit patterns through a Uint32Array view, never through a JS number,
 * so NaN payloads survive exactly (a number round trip may quiet a signalling NaN).
 */

const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function u32View(array: Float32Array): Uint32Array {
  return new Uint32Array(array.buffer, array.byteOffset, array.length);
}

function checkPair(action: string, srcElements: number, dstElements: number, srcBytes?: number): void {
  if (srcBytes !== undefined && srcBytes % 2 !== 0) {
    throw new TensorsError(
      "CONVERT_BAD_LENGTH",
      `${action}: source has ${srcBytes} bytes, which is not a whole number of 2-byte elements. Pass the tensor's exact bytes.`,
      { kind: "input" },
    );
  }
  if (dstElements < srcElements) {
    throw new TensorsError(
      "CONVERT_BUFFER_TOO_SMALL",
      `${action}: destination holds ${dstElements} elements but the source has ${srcElements}. Pass a destination at least as long as the source.`,
      { kind: "input" },
    );
  }
}

/** A Uint16Array over `src` when aligned on a little-endian host, else undefined (use byte reads). */
function u16Aligned(src: Uint8Array): Uint16Array | undefined {
  if (!HOST_IS_LITTLE_ENDIAN || src.byteOffset % 2 !== 0) return undefined;
  return new Uint16Array(src.buffer, src.byteOffset, src.length >>> 1);
}

// --- BF16

/** F32 bit pattern -> BF16 bit pattern: round to nearest even; NaN stays a quiet NaN (sign and top payload kept); ±Inf kept. */
export function f32BitsToBf16Bits(bits: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x0040) & 0xffff;
  const lsb = (bits >>> 16) & 1;
  return ((bits + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** Raw BF16 bytes (little-endian) -> F32 values in `dst`. Exact (BF16 is the top half of F32). */
export function bf16BytesToF32(src: Uint8Array, dst: Float32Array): void {
  const n = src.length >>> 1;
  checkPair("convert BF16 to F32", n, dst.length, src.length);
  const out = u32View(dst);
  const aligned = u16Aligned(src);
  if (aligned) {
    for (let i = 0; i < n; i++) out[i] = aligned[i]! << 16;
  } else {
    for (let i = 0; i < n; i++) out[i] = (src[2 * i]! | (src[2 * i + 1]! << 8)) << 16;
  }
}

/** F32 values -> raw BF16 bytes (little-endian) in `dst`, rounding to nearest even. */
export function f32ToBf16Bytes(src: Float32Array, dst: Uint8Array): void {
  const n = src.length;
  checkPair("convert F32 to BF16", n, dst.length >>> 1);
  const bits = u32View(src);
  const aligned = u16Aligned(dst);
  if (aligned) {
    // The rounding of f32BitsToBf16Bits written out: this loop carries every merged or converted
    // element, and a call per element costs about twice the arithmetic.
    for (let i = 0; i < n; i++) {
      const b = bits[i]!;
      aligned[i] =
        (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x0040 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
    }
    return;
  }
  for (let i = 0; i < n; i++) {
    const h = f32BitsToBf16Bits(bits[i]!);
    dst[2 * i] = h & 0xff;
    dst[2 * i + 1] = h >>> 8;
  }
}

// --- F16

/** F16 bit pattern -> F32 bit pattern: exact, subnormals normalised, NaN payload kept (and made quiet). */
export function f16BitsToF32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exponent = (h >>> 10) & 0x1f;
  let mantissa = h & 0x3ff;
  if (exponent === 0x1f) {
    // ±Inf stays; a NaN keeps its sign and payload and is made quiet, as torch does
    return (sign | 0x7f800000 | (mantissa === 0 ? 0 : 0x400000) | (mantissa << 13)) >>> 0;
  }
  if (exponent !== 0) return (sign | ((exponent + 112) << 23) | (mantissa << 13)) >>> 0;
  if (mantissa === 0) return sign >>> 0;
  // subnormal: value = mantissa × 2^-24; shift the leading one into the implicit bit
  let e = 113;
  while ((mantissa & 0x400) === 0) {
    mantissa <<= 1;
    e--;
  }
  return (sign | (e << 23) | ((mantissa & 0x3ff) << 13)) >>> 0;
}

/** F32 bit pattern -> F16 bit pattern: round to nearest even, overflow to ±Inf, correct subnormals, NaN stays a quiet NaN. */
export function f32BitsToF16Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00 | ((abs >>> 13) & 0x3ff);
  // 65520 (0x477ff000) and above round to infinity
  if (abs >= 0x477ff000) return sign | 0x7c00;
  // at or below 2^-25 (0x33000000) rounds to zero (2^-25 itself is a tie that goes to the even zero)
  if (abs <= 0x33000000) return sign;
  if (abs < 0x38800000) {
    // F16 subnormal: mantissa16 = m × 2^(e - 126), rounded to nearest even
    const e = abs >>> 23;
    const m = (abs & 0x7fffff) | 0x800000;
    const shift = 126 - e;
    const truncated = m >>> shift;
    const remainder = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    const rounded =
      remainder > half || (remainder === half && (truncated & 1) === 1) ? truncated + 1 : truncated;
    return sign | rounded;
  }
  const truncated = (abs - 0x38000000) >>> 13;
  const remainder = abs & 0x1fff;
  const rounded =
    remainder > 0x1000 || (remainder === 0x1000 && (truncated & 1) === 1) ? truncated + 1 : truncated;
  return sign | rounded;
}

let f16Table: Uint32Array | undefined;

/** All 65536 F16 -> F32 bit patterns, built once (256 KiB) so decoding is one lookup per element. */
function f16ToF32Table(): Uint32Array {
  if (!f16Table) {
    f16Table = new Uint32Array(65536);
    for (let h = 0; h < 65536; h++) f16Table[h] = f16BitsToF32Bits(h);
  }
  return f16Table;
}

/** Raw F16 bytes (little-endian) -> F32 values in `dst`. Exact; signalling NaNs come back quiet. */
export function f16BytesToF32(src: Uint8Array, dst: Float32Array): void {
  const n = src.length >>> 1;
  checkPair("convert F16 to F32", n, dst.length, src.length);
  const table = f16ToF32Table();
  const out = u32View(dst);
  const aligned = u16Aligned(src);
  if (aligned) {
    for (let i = 0; i < n; i++) out[i] = table[aligned[i]!]!;
  } else {
    for (let i = 0; i < n; i++) out[i] = table[src[2 * i]! | (src[2 * i + 1]! << 8)]!;
  }
}

/** F32 values -> raw F16 bytes (little-endian) in `dst`, rounding to nearest even. */
export function f32ToF16Bytes(src: Float32Array, dst: Uint8Array): void {
  const n = src.length;
  checkPair("convert F32 to F16", n, dst.length >>> 1);
  const bits = u32View(src);
  for (let i = 0; i < n; i++) {
    const h = f32BitsToF16Bits(bits[i]!);
    dst[2 * i] = h & 0xff;
    dst[2 * i + 1] = h >>> 8;
  }
}
