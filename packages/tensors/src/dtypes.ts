/**
 * Element types, named as safetensors 0.8 names them, with the bits of one element. torch
 * storages map onto the same names (BFloat16Storage -> BF16, LongStorage -> I64, ...), so one
 * table serves both formats.
 */
export const DTYPE_BITS = {
  BOOL: 8,
  U8: 8,
  I8: 8,
  F8_E4M3: 8,
  F8_E5M2: 8,
  /** OCP MX scale: an exponent only (bias 127, 0xff is NaN). */
  F8_E8M0: 8,
  /** AMD's variants: no negative zero, 0x80 is the only NaN, bias one higher than E4M3/E5M2. */
  F8_E4M3FNUZ: 8,
  F8_E5M2FNUZ: 8,
  /** OCP MX 6-bit floats, packed: a tensor's element count × 6 must be a whole number of bytes. */
  F6_E2M3: 6,
  F6_E3M2: 6,
  /** OCP MX FP4 (E2M1), packed two to a byte: a tensor's element count must be even. */
  F4: 4,
  I16: 16,
  U16: 16,
  F16: 16,
  BF16: 16,
  I32: 32,
  U32: 32,
  F32: 32,
  I64: 64,
  U64: 64,
  F64: 64,
  /** complex64: two F32, real then imaginary (safetensors names it C64 too). */
  C64: 64,
  /** complex128: two F64; torch files only, safetensors has no name for it. */
  C128: 128,
} as const;

export type DType = keyof typeof DTYPE_BITS;

export function isDType(name: string): name is DType {
  return Object.hasOwn(DTYPE_BITS, name);
}

/** Element types a torch file may hold that the safetensors format has no name for. */
const TORCH_ONLY_DTYPES: ReadonlySet<string> = new Set<DType>(["C128"]);

/** True for a dtype name the safetensors format defines (a header may use it, a writer may write it). */
export function isSafetensorsDType(name: string): name is DType {
  return isDType(name) && !TORCH_ONLY_DTYPES.has(name);
}

/** The dtypes whose elements are packed below a byte (F4, F6_*): no element has a byte offset of its own. */
export function isSubByteDType(dtype: DType): boolean {
  return DTYPE_BITS[dtype] % 8 !== 0;
}

/**
 * Bytes of one element. A fraction for the packed sub-byte dtypes (F4 0.5, F6_* 0.75): code that
 * addresses elements by byte must refuse those by name first (isSubByteDType); a tensor's length
 * is packedByteLength's.
 */
export function dtypeSize(dtype: DType): number {
  return DTYPE_BITS[dtype] / 8;
}

/**
 * Bytes of `elements` packed elements of `dtype`, exact for any safe-integer count, or undefined
 * when they do not end on a byte boundary (safetensors' rule: a tensor's bits are a multiple of 8;
 * the reference calls a violation a misaligned slice). Not a safe integer when too large.
 */
export function packedByteLength(dtype: DType, elements: number): number | undefined {
  const bits = DTYPE_BITS[dtype];
  if (bits % 8 === 0) return elements * (bits / 8);
  const rest = elements % 8;
  if ((rest * bits) % 8 !== 0) return undefined;
  // Eight elements are always `bits` whole bytes; split so no product loses precision.
  return (elements - rest) * (bits / 8) + (rest * bits) / 8;
}

/** One tensor as a container lists it: no data, only where and what. */
export interface TensorInfo {
  /** Full key, e.g. `model.layers.0.mlp.up_proj.weight` (torch nested dicts joined with "."). */
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Bytes of the tensor's own elements (numel × dtype bits / 8), not of its storage. */
  readonly byteLength: number;
}
