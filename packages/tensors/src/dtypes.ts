/**
 * Element types, named as safetensors names them. torch storages map onto the same names
 * (BFloat16Storage -> BF16, LongStorage -> I64, ...), so one table serves both formats.
 */
export const DTYPE_SIZES = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  I64: 8,
  U64: 8,
  F64: 8,
  /** complex64: two F32, real then imaginary (safetensors names it C64 too). */
  C64: 8,
  /** complex128: two F64; torch files only, safetensors has no name for it. */
  C128: 16,
} as const;

export type DType = keyof typeof DTYPE_SIZES;

export function isDType(name: string): name is DType {
  return Object.hasOwn(DTYPE_SIZES, name);
}

/** Element types a torch file may hold that the safetensors format has no name for. */
const TORCH_ONLY_DTYPES: ReadonlySet<string> = new Set<DType>(["C128"]);

/** True for a dtype name the safetensors format defines (a header may use it, a writer may write it). */
export function isSafetensorsDType(name: string): name is DType {
  return isDType(name) && !TORCH_ONLY_DTYPES.has(name);
}

export function dtypeSize(dtype: DType): number {
  return DTYPE_SIZES[dtype];
}

/** One tensor as a container lists it: no data, only where and what. */
export interface TensorInfo {
  /** Full key, e.g. `model.layers.0.mlp.up_proj.weight` (torch nested dicts joined with "."). */
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Bytes of the tensor's own elements (numel × dtype size), not of its storage. */
  readonly byteLength: number;
}
