"""Reference conversions from PyTorch for the dtype tests: edge values plus seeded random bit
patterns, converted by torch, printed as JSON of bit patterns (unsigned integers)."""
import json
import struct
import sys

import numpy as np
import torch


def f32_bits(values):
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in values]


EDGE_F32 = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000,  # ±0, ±1
    0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,  # subnormals, min normal
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,  # ±max, ±inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000, 0xFFC00001, 0x7FFFFFFF,  # NaNs and payloads
    0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,  # BF16 ties and near-ties
    0x7F7F8000, 0x7F7F7FFF, 0x00008000, 0x00018000,  # BF16 overflow tie, subnormal ties
] + f32_bits([
    65504.0, 65519.0, 65520.0, 65536.0, -65520.0,  # F16 max and overflow boundary
    2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 2.0**-26, 1.5 * 2.0**-24, 2.5 * 2.0**-24, 3.5 * 2.0**-24,
    2.0**-14, 2.0**-14 * 0.99999994, 2.0**-15, 1023.5 * 2.0**-24, 1023.75 * 2.0**-24,
    1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-20, 2048.0 + 1.0, 2048.0 + 3.0,
    0.1, -0.1, 3.14159265, 1e-8, 1e-40, -1e-45,
])

rng = np.random.default_rng(20251129)
random_bits = rng.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32)
f32_in = np.concatenate([np.array(EDGE_F32, dtype=np.uint32), random_bits]).view(np.float32)

t = torch.from_numpy(f32_in.copy())
to_bf16 = t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
to_f16 = t.to(torch.float16).view(torch.int16).numpy().view(np.uint16)

all16 = torch.from_numpy(np.arange(65536, dtype=np.uint16).view(np.int16))
f16_to_f32 = all16.view(torch.float16).float().view(torch.int32).numpy().view(np.uint32)
bf16_to_f32 = all16.view(torch.bfloat16).float().view(torch.int32).numpy().view(np.uint32)

I64_EDGE = [0, 1, -1, 2**24 + 1, 2**53 + 1, 2**60 + 2**36 + 1, 2**60 + 2**36, -(2**60 + 2**36 + 1),
            2**63 - 1, -(2**63), 2**62 + 2**38 - 1, 16777217, -16777217, 123456789012345678]
i64 = np.concatenate([np.array(I64_EDGE, dtype=np.int64), rng.integers(-(2**63), 2**63 - 1, size=2000, dtype=np.int64)])
i64_to_f32 = torch.from_numpy(i64).float().view(torch.int32).numpy().view(np.uint32)

json.dump({
    "torch": torch.__version__,
    "f32": f32_in.view(np.uint32).tolist(),
    "f32ToBf16": to_bf16.tolist(),
    "f32ToF16": to_f16.tolist(),
    "f16ToF32": f16_to_f32.tolist(),
    "bf16ToF32": bf16_to_f32.tolist(),
    "i64": [str(v) for v in i64.tolist()],
    "i64ToF32": i64_to_f32.tolist(),
}, sys.stdout)
