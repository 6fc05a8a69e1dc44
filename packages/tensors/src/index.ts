// Public surface of @ckpt/tensors. Each block is owned by one area; add exports in your block.

// --- shared vocabulary
export { TensorsError, type ErrorKind } from "./errors.js";
export { DTYPE_SIZES, type DType, isDType, dtypeSize, type TensorInfo } from "./dtypes.js";

// --- safetensors, dtype conversion, HF directories, inspect (src/safetensors, src/convert, src/hf, src/inspect.ts)

// --- torch.save zip + restricted unpickler + DCP metadata (src/torch, src/dcp)
export { openTorchFile, type TorchFile, type TorchTensorEntry } from "./torch/reader.js";
export { TorchTensor, TorchStorageRef } from "./torch/tensor-policy.js";
export { PickleDict, PickleTuple, PickleSet, PickleGlobal, PickleObject } from "./torch/pickle/values.js";
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
  checkDcpDirectory,
  type DcpMetadata,
  type DcpTensor,
  type DcpChunk,
  type DcpBytesEntry,
  type DcpStorageInfo,
  type DcpProblem,
  type DcpProblemCode,
  type DcpCheckResult,
} from "./dcp/metadata.js";
