"""Writes torch.save files for the verify tests with Debian's PyTorch (/usr/bin/python3).

  nonfinite_fixture.py OUTDIR   writes clean.pt, dirty.pt and objects.pt; prints what dirty.pt holds
"""
import json
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
g = torch.Generator().manual_seed(7)
clean = {"w": torch.randn(4, 8, generator=g).to(torch.bfloat16), "step": torch.tensor(3), "b": torch.randn(5, generator=g)}
torch.save(clean, os.path.join(out, "clean.pt"))

bf16 = torch.randn(4, 8, generator=g).to(torch.bfloat16)
bf16[1, 2] = float("nan")
bf16[3, 0] = float("inf")
f16 = torch.randn(16, generator=g).half()
f16[9] = float("-inf")
f32 = torch.randn(6, 6, generator=g)
f32[0, 5] = float("nan")
f32[5, 5] = float("nan")
base = torch.arange(24, dtype=torch.float32)
base[7] = float("inf")
dirty = {
    "model": {"bf16": bf16, "f16": f16, "f32": f32, "ints": torch.arange(10)},
    "strided": base.view(4, 6)[:, 1::2],  # holds base[7] = inf (row 1, col 1) but not base[6]
}
torch.save(dirty, os.path.join(out, "dirty.pt"))

# numpy RNG state is a legitimate trainer.pt member the restricted unpickler does not read.
torch.save({"w": torch.ones(3), "rng": np.random.RandomState(0).get_state()}, os.path.join(out, "objects.pt"))
print(json.dumps({"bf16": [1, 1, 0], "f16": [0, 0, 1], "f32": [2, 0, 0], "strided": [0, 1, 0]}))
