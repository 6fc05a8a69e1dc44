import { type DType, dtypeSize } from "../dtypes.js";
import { TensorsError } from "../errors.js";
import { bf16BytesToF32, f16BitsToF32Bits, f16BytesToF32 } from "./floats.js";

/**
 * Element-wise helpers over raw little-endian tensor bytes, for merging and converting tensors
 * without materialising them as JS arrays. Nothing here allocates per element; the only buffer
 * allocated is one scratch chunk per process, reused.
 */

/** Elements decoded per step by `accumulateScaledInto` (256 KiB of F32 scratch). */
const CHUNK_ELEMENTS = 65536;
let scratch: Float32Array | undefined;

let f8E4M3Table: Uint32Array | undefined;
let f8E5M2Table: Uint32Array | undefined;

/** F8_E4M3 (the "fn" variant torch and safetensors use: bias 7, no infinities, S.1111.111 is NaN) -> F32 bits. */
function f8E4M3ToF32Table(): Uint32Array {
  if (!f8E4M3Table) {
    f8E4M3Table = new Uint32Array(256);
    const value = new Float32Array(1);
    const bits = new Uint32Array(value.buffer);
    for (let b = 0; b < 256; b++) {
      const exponent = (b >>> 3) & 0xf;
      const mantissa = b & 7;
      const magnitude =
        exponent === 0xf && mantissa === 7
          ? Number.NaN
          : exponent === 0
            ? mantissa * 2 ** -9
            : (1 + mantissa / 8) * 2 ** (exponent - 7);
      value[0] = b & 0x80 ? -magnitude : magnitude;
      f8E4M3Table[b] = bits[0]!;
    }
  }
  return f8E4M3Table;
}

/** F8_E5M2 is the top byte of an F16, so its table is the F16 decoding of `b << 8`. */
function f8E5M2ToF32Table(): Uint32Array {
  if (!f8E5M2Table) {
    f8E5M2Table = new Uint32Array(256);
    for (let b = 0; b < 256; b++) f8E5M2Table[b] = f16BitsToF32Bits(b << 8);
  }
  return f8E5M2Table;
}

const roundingScratch = new Float64Array(1);
const roundingWords = new Uint32Array(roundingScratch.buffer);

/**
 * `high + low` (high a multiple of 2^32, 0 <= low < 2^32) rounded to odd: the truncated sum with
 * its last bit forced to 1 when inexact. A later rounding to F32 is then correctly rounded, as if
 * from the exact 64-bit integer (plain double rounding could round twice at a midpoint).
 */
function sumRoundedToOdd(high: number, low: number): number {
  const sum = high + low;
  const error = high - sum + low; // exact: |high| >= 2^32 > low whenever high != 0 (Fast2Sum)
  if (error === 0) return sum;
  roundingScratch[0] = sum;
  if ((roundingWords[0]! & 1) === 1) return sum;
  if (error > 0 === sum > 0) {
    roundingWords[0] = roundingWords[0]! + 1;
  } else if (roundingWords[0] === 0) {
    roundingWords[0] = 0xffffffff;
    roundingWords[1] = roundingWords[1]! - 1;
  } else {
    roundingWords[0] = roundingWords[0]! - 1;
  }
  return roundingScratch[0]!;
}

/** The dtypes `toFloat32` decodes; the others (packed F4/F6, the MX scale, FNUZ floats, complex) are refused by name. */
const DECODABLE_DTYPES: readonly DType[] = [
  "BF16",
  "F16",
  "F32",
  "F64",
  "F8_E4M3",
  "F8_E5M2",
  "BOOL",
  "U8",
  "I8",
  "U16",
  "I16",
  "U32",
  "I32",
  "U64",
  "I64",
];

function checkLengths(action: string, dtype: DType, srcBytes: number, dstElements: number): number {
  if (!DECODABLE_DTYPES.includes(dtype)) {
    throw new TensorsError(
      "CONVERT_DTYPE_UNSUPPORTED",
      `${action}: ckpt has no numeric decoding of ${dtype}; it decodes ${DECODABLE_DTYPES.join(", ")}. Keep ${dtype} tensors as bytes (copy them) or convert them with torch.`,
      { kind: "input" },
    );
  }
  const size = dtypeSize(dtype);
  if (srcBytes % size !== 0) {
    throw new TensorsError(
      "CONVERT_BAD_LENGTH",
      `${action}: source has ${srcBytes} bytes, which is not a whole number of ${dtype} elements (${size} bytes each). Pass the tensor's exact bytes.`,
      { kind: "input" },
    );
  }
  const n = srcBytes / size;
  if (dstElements < n) {
    throw new TensorsError(
      "CONVERT_BUFFER_TOO_SMALL",
      `${action}: destination holds ${dstElements} elements but the source has ${n}. Pass a destination at least as long as the source.`,
      { kind: "input" },
    );
  }
  return n;
}

/**
 * Decodes raw little-endian bytes of any supported dtype into F32 values in `dst`.
 * F32/F16/BF16/F8 are exact; F64 and integers are rounded to the nearest F32 (ties to even), as
 * torch's `.float()` does. BOOL decodes to 0 or 1.
 */
export function toFloat32(src: Uint8Array, dtype: DType, dst: Float32Array): void {
  const action = `convert ${dtype} to F32`;
  const n = checkLengths(action, dtype, src.length, dst.length);
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  switch (dtype) {
    case "BF16":
      bf16BytesToF32(src, dst);
      return;
    case "F16":
      f16BytesToF32(src, dst);
      return;
    case "F32": {
      const out = new Uint32Array(dst.buffer, dst.byteOffset, n);
      for (let i = 0; i < n; i++) out[i] = view.getUint32(4 * i, true);
      return;
    }
    case "F64":
      for (let i = 0; i < n; i++) dst[i] = view.getFloat64(8 * i, true);
      return;
    case "F8_E4M3":
    case "F8_E5M2": {
      const table = dtype === "F8_E4M3" ? f8E4M3ToF32Table() : f8E5M2ToF32Table();
      const out = new Uint32Array(dst.buffer, dst.byteOffset, n);
      for (let i = 0; i < n; i++) out[i] = table[src[i]!]!;
      return;
    }
    case "BOOL":
      for (let i = 0; i < n; i++) dst[i] = src[i] === 0 ? 0 : 1;
      return;
    case "U8":
      for (let i = 0; i < n; i++) dst[i] = src[i]!;
      return;
    case "I8":
      for (let i = 0; i < n; i++) dst[i] = view.getInt8(i);
      return;
    case "U16":
      for (let i = 0; i < n; i++) dst[i] = view.getUint16(2 * i, true);
      return;
    case "I16":
      for (let i = 0; i < n; i++) dst[i] = view.getInt16(2 * i, true);
      return;
    case "U32":
      for (let i = 0; i < n; i++) dst[i] = view.getUint32(4 * i, true);
      return;
    case "I32":
      for (let i = 0; i < n; i++) dst[i] = view.getInt32(4 * i, true);
      return;
    case "U64":
      for (let i = 0; i < n; i++) {
        dst[i] = sumRoundedToOdd(view.getUint32(8 * i + 4, true) * 4294967296, view.getUint32(8 * i, true));
      }
      return;
    case "I64":
      for (let i = 0; i < n; i++) {
        dst[i] = sumRoundedToOdd(view.getInt32(8 * i + 4, true) * 4294967296, view.getUint32(8 * i, true));
      }
      return;
  }
}

/**
 * `acc[i] += scale × src[i]` for raw bytes `src` of any dtype `toFloat32` decodes. Each product
 * and sum is computed in double precision and rounded once to F32 on store. Decodes through one
 * reused scratch chunk, so memory stays flat whatever the tensor size.
 */
export function accumulateScaledInto(acc: Float32Array, src: Uint8Array, dtype: DType, scale: number): void {
  const size = dtypeSize(dtype);
  const n = checkLengths(`accumulate ${dtype} into F32`, dtype, src.length, acc.length);
  if (!Number.isFinite(scale)) {
    throw new TensorsError(
      "CONVERT_BAD_SCALE",
      `accumulate ${dtype} into F32: scale ${scale} is not a finite number. Pass a finite weight.`,
      { kind: "input" },
    );
  }
  scratch ??= new Float32Array(CHUNK_ELEMENTS);
  for (let start = 0; start < n; start += CHUNK_ELEMENTS) {
    const count = Math.min(CHUNK_ELEMENTS, n - start);
    const chunk = scratch.subarray(0, count);
    toFloat32(src.subarray(start * size, (start + count) * size), dtype, chunk);
    for (let i = 0; i < count; i++) acc[start + i] = acc[start + i]! + scale * chunk[i]!;
  }
}
