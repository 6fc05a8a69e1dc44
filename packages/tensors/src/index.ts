// Public surface of @ckpt/tensors. Each block is owned by one area; add exports in your block.

// --- shared vocabulary
export { TensorsError, type ErrorKind } from "./errors.js";
export { DTYPE_SIZES, type DType, isDType, dtypeSize, type TensorInfo } from "./dtypes.js";

// --- safetensors, dtype conversion, HF directories, inspect (src/safetensors, src/convert, src/hf, src/inspect.ts)

// --- torch.save zip + restricted unpickler + DCP metadata (src/torch, src/dcp)
