// Public surface of @ckpt/tensors. Each block is owned by one area; add exports in your block.

// --- shared vocabulary
export { TensorsError, type ErrorKind } from "./errors.js";
export {
  DTYPE_BITS,
  type DType,
  isDType,
  isSafetensorsDType,
  isSubByteDType,
  dtypeSize,
  packedByteLength,
  type TensorInfo,
} from "./dtypes.js";

// --- safetensors, dtype conversion, HF directories, inspect (src/safetensors, src/convert, src/hf, src/inspect.ts)
export {
  HEADER_LENGTH_BYTES,
  MAX_HEADER_BYTES,
  MAX_TENSOR_RANK,
  parseSafetensorsHeader,
  readHeaderLength,
  type SafetensorsHeader,
  type SafetensorsTensorInfo,
} from "./safetensors/header.js";
export { openSafetensors, readSafetensorsHeader, type SafetensorsFile } from "./safetensors/reader.js";
export {
  MAX_SHARDS,
  planSafetensors,
  planShards,
  safetensorsChunks,
  writeSafetensors,
  writeShardedSafetensors,
  type PlannedTensor,
  type SafetensorsPlan,
  type ShardedWriteResult,
  type ShardPlan,
  type TensorBytesProvider,
  type TensorDescription,
  type WrittenFile,
} from "./safetensors/writer.js";
export {
  bf16BytesToF32,
  f16BitsToF32Bits,
  f16BytesToF32,
  f32BitsToBf16Bits,
  f32BitsToF16Bits,
  f32ToBf16Bytes,
  f32ToF16Bytes,
} from "./convert/floats.js";
export { accumulateScaledInto, toFloat32 } from "./convert/elementwise.js";
export {
  checkShardName,
  HF_INDEX_FILE,
  HF_SINGLE_FILE,
  MAX_INDEX_BYTES,
  MAX_SHARD_COUNT,
  openHfDirectory,
  parseSafetensorsIndex,
  type HfDirectory,
  type HfTensorInfo,
  type SafetensorsIndex,
} from "./hf/directory.js";
export {
  inspectPath,
  listTensors,
  type InspectKind,
  type InspectOptions,
  type InspectReport,
  type InspectedTensor,
} from "./inspect.js";

// --- torch.save zip + restricted unpickler + DCP metadata (src/torch, src/dcp)
export { openTorchFile, type TorchFile, type TorchTensorEntry } from "./torch/reader.js";
export { TorchStorageRef, TorchTensor } from "./torch/torch-tensor.js";
export {
  PickleDict,
  PickleFloat,
  PickleTuple,
  PickleSet,
  PickleGlobal,
  PickleObject,
} from "./torch/pickle/values.js";
export {
  writeTorchFile,
  type WriteTorchFileOptions,
  type WriteTorchFileResult,
  type TorchTensorDesc,
  type TorchTree,
  type TorchTreeValue,
  type TensorBytes,
} from "./torch/writer/write.js";
export {
  readDcpMetadata,
  parseDcpMetadata,
  type DcpMetadata,
  type DcpTensor,
  type DcpChunk,
  type DcpBytesEntry,
  type DcpStorageInfo,
} from "./dcp/metadata.js";
export {
  checkDcpDirectory,
  dcpCompleteness,
  DCP_COMPLETENESS_CODES,
  type DcpCompletenessCode,
  type DcpProblem,
  type DcpProblemCode,
  type DcpCheckResult,
} from "./dcp/completeness.js";

// --- verification: tensor files, DCP directories, NaN/Inf scans (src/verify)
export {
  FLOAT_DTYPES,
  type FloatDType,
  type NonFiniteCount,
  NonFiniteCounter,
  countNonFinite,
  isFloatDType,
} from "./verify/finite.js";
export { TENSOR_PROBLEM_CODES, type TensorProblem, type TensorProblemCode } from "./verify/problems.js";
export {
  type DcpDirectoryReport,
  type TensorFileFormat,
  type TensorFileReport,
  type VerifyTensorFileOptions,
  verifyDcpDirectory,
  verifyTensorFile,
} from "./verify/file.js";
