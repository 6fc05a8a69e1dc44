import type { DType } from "../dtypes.js";

/** Legacy typed-storage classes (`torch.FloatStorage`, ...) as torch.save names them, by element type. */
export const STORAGE_CLASS_DTYPES: Readonly<Record<string, DType>> = {
  BFloat16Storage: "BF16",
  HalfStorage: "F16",
  FloatStorage: "F32",
  DoubleStorage: "F64",
  LongStorage: "I64",
  IntStorage: "I32",
  ShortStorage: "I16",
  CharStorage: "I8",
  ByteStorage: "U8",
  BoolStorage: "BOOL",
  ComplexFloatStorage: "C64",
  ComplexDoubleStorage: "C128",
};

/** torch dtype globals (`torch.bfloat16`, ...) that newer torch puts in persistent ids and DCP metadata. */
export const TORCH_DTYPE_NAMES: Readonly<Record<string, DType>> = {
  bfloat16: "BF16",
  float16: "F16",
  half: "F16",
  float32: "F32",
  float: "F32",
  float64: "F64",
  double: "F64",
  int64: "I64",
  long: "I64",
  int32: "I32",
  int: "I32",
  int16: "I16",
  short: "I16",
  int8: "I8",
  uint8: "U8",
  bool: "BOOL",
  uint16: "U16",
  uint32: "U32",
  uint64: "U64",
  float8_e4m3fn: "F8_E4M3",
  float8_e5m2: "F8_E5M2",
  float8_e4m3fnuz: "F8_E4M3FNUZ",
  float8_e5m2fnuz: "F8_E5M2FNUZ",
  float8_e8m0fnu: "F8_E8M0",
  complex64: "C64",
  cfloat: "C64",
  complex128: "C128",
  cdouble: "C128",
};

/** The storage class torch.save writes for each element type (the reverse of STORAGE_CLASS_DTYPES). */
export const DTYPE_STORAGE_CLASSES: Readonly<Partial<Record<DType, string>>> = Object.fromEntries(
  Object.entries(STORAGE_CLASS_DTYPES).map(([cls, dtype]) => [dtype, cls]),
);
