"""The reference safetensors library (0.8, Rust core) as a judge and a writer for ckpt's tests.

  judge FILE...      prints {file: {"deserialize": verdict, "safe_open": verdict}}: each verdict
                     is {"ok": true} or {"ok": false, "error": "..."}; deserialize is the Rust
                     core's whole-file validation, safe_open the mmap path loaders use.
  write PATH         writes PATH with safetensors.torch.save_file: one tensor of every dtype torch
                     has a safetensors name for, zero-size tensors and metadata; prints
                     {"metadata": ..., "tensors": {name: {dtype, shape, sha256}}} of what it wrote.
  read PATH          reads PATH three ways (safe_open torch, safe_open numpy, torch load_file) and
                     prints per way {"metadata": ..., "tensors": {name: {dtype, shape, sha256}}}
                     or, for a tensor numpy has no dtype for, {"error": "..."}.
"""
import hashlib
import json
import sys

import numpy as np
import torch
from safetensors import deserialize, safe_open
from safetensors.torch import load_file, save_file

# The file's dtype name for each torch dtype, as safetensors.torch maps them.
SAFETENSORS_NAMES = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.uint16: "U16", torch.int16: "I16",
    torch.uint32: "U32", torch.int32: "I32", torch.uint64: "U64", torch.int64: "I64",
    torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64",
    torch.complex64: "C64", torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2",
    torch.float8_e8m0fnu: "F8_E8M0", torch.float8_e4m3fnuz: "F8_E4M3FNUZ",
    torch.float8_e5m2fnuz: "F8_E5M2FNUZ", torch.float4_e2m1fn_x2: "F4",
}


def verdict(action):
    try:
        action()
        return {"ok": True}
    except Exception as error:  # the judge reports every refusal, whatever its class
        return {"ok": False, "error": f"{type(error).__name__}: {error}"[:300]}


def open_all(path):
    with safe_open(path, framework="pt") as f:
        f.metadata()
        list(f.keys())


def judge(paths):
    out = {}
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        out[path] = {"deserialize": verdict(lambda: deserialize(data)), "safe_open": verdict(lambda: open_all(path))}
    return out


def raw(tensor):
    """A tensor's bytes as the file holds them (little-endian, C order)."""
    flat = tensor.contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() > 0 else b""


def file_shape(tensor):
    # torch packs two F4 elements a byte (float4_e2m1fn_x2); the file counts elements.
    shape = list(tensor.shape)
    if tensor.dtype == torch.float4_e2m1fn_x2 and shape:
        shape[-1] *= 2
    return shape


def describe(tensor):
    return {"dtype": SAFETENSORS_NAMES[tensor.dtype], "shape": file_shape(tensor),
            "sha256": hashlib.sha256(raw(tensor)).hexdigest()}


def pattern(count, seed):
    return torch.tensor([(seed * 31 + 7 * i) % 251 for i in range(count)], dtype=torch.uint8)


def write(path):
    tensors = {}
    for seed, dtype in enumerate(SAFETENSORS_NAMES):
        name = SAFETENSORS_NAMES[dtype].lower()
        item = torch.empty((), dtype=dtype).element_size()
        if dtype == torch.bool:
            tensors[name] = pattern(6, seed).remainder(2).bool().reshape(2, 3)
        else:
            tensors[name] = pattern(6 * item, seed).view(dtype).reshape(2, 3)
        tensors[f"{name}.empty"] = torch.empty((0, 3), dtype=dtype)
    tensors["f32.scalar"] = torch.tensor(1.5, dtype=torch.float32)
    metadata = {"format": "pt", "note": "ünïcode ✓ \"quoted\"\nnew line", "": "empty key"}
    save_file(tensors, path, metadata=metadata)
    return {"metadata": metadata, "tensors": {k: describe(v) for k, v in tensors.items()}}


def read(path):
    out = {}
    with safe_open(path, framework="pt") as f:
        out["safe_open_pt"] = {"metadata": f.metadata(), "tensors": {k: describe(f.get_tensor(k)) for k in f.keys()}}
    with safe_open(path, framework="numpy") as f:
        tensors = {}
        for k in f.keys():
            try:
                array = np.ascontiguousarray(f.get_tensor(k))
                tensors[k] = {"shape": list(array.shape), "sha256": hashlib.sha256(array.tobytes()).hexdigest()}
            except Exception as error:  # numpy has no dtype for BF16, F8_*, F4, F6_*
                tensors[k] = {"error": f"{type(error).__name__}: {error}"[:200]}
        out["safe_open_numpy"] = {"metadata": f.metadata(), "tensors": tensors}
    out["load_file"] = {"tensors": {k: describe(v) for k, v in load_file(path).items()}}
    return out


def main():
    command, args = sys.argv[1], sys.argv[2:]
    result = {"judge": lambda: judge(args), "write": lambda: write(args[0]), "read": lambda: read(args[0])}[command]()
    json.dump(result, sys.stdout, ensure_ascii=False)


main()
