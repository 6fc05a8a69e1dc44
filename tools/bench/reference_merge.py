#!/usr/bin/python3
"""Reference expert merge in PyTorch, for tools/bench/merge.bench.mjs and the bit-identity test.

What a plain torch script does: torch.load every expert, merge key by key in float32, round once
to the experts' dtype, torch.save({"net": merged}). The float32 operations, in this order, define
the result ckpt's merge must reproduce bit for bit (see docs/merge.md):

    avg: acc = x[0].float(); acc += x[k].float() for k = 1, 2, ...; acc /= n
    tv:  b = base.float(); acc = x[0].float() - b; acc += (x[k].float() - b) for k = 1, 2, ...;
         acc = b + lam * acc
    out = acc.to(dtype)   (round to nearest even)

An explicit left fold starting from the first expert: Python's sum() would start from the integer
0, and 0 + (-0.0) is +0.0, so an element that is -0.0 in every expert would come out +0.0.

    /usr/bin/python3 tools/bench/reference_merge.py --mode avg|tv --experts a.pt,b.pt[,...] \
        [--base HF_DIR] [--lam 1.0] --out OUT.pt

Experts are torch.save({"net": state_dict}) files or .safetensors files; the base is a Hugging
Face directory (model.safetensors.index.json + shards, or one model.safetensors), read without the
safetensors package (not installed here). Prints one JSON line with the phase times in seconds.
"""

import argparse
import json
import os
import struct
import time

import numpy
import torch

DTYPES = {
    "BF16": (numpy.int16, torch.bfloat16),
    "F16": (numpy.float16, torch.float16),
    "F32": (numpy.float32, torch.float32),
}


def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        np_dtype, torch_dtype = DTYPES[info["dtype"]]
        array = numpy.frombuffer(data, dtype=np_dtype, count=(end - begin) // numpy.dtype(np_dtype).itemsize, offset=begin)
        out[name] = torch.from_numpy(array.copy()).view(torch_dtype).reshape(info["shape"])
    return out


def read_expert(path):
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    return torch.load(path, map_location="cpu")["net"]


def read_base(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(directory, "model.safetensors"))
    with open(index, encoding="utf-8") as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for shard in shards:
        out.update(read_safetensors(os.path.join(directory, shard)))
    return out


def merge(mode, experts, base, lam):
    merged = {}
    for name, first in experts[0].items():
        if mode == "avg":
            acc = first.to(torch.float32, copy=True)
            for expert in experts[1:]:
                acc += expert[name].float()
            acc /= len(experts)
        else:
            b = base[name].float()
            acc = first.float() - b
            for expert in experts[1:]:
                acc += expert[name].float() - b
            acc = b + lam * acc
        merged[name] = acc.to(first.dtype)
    return merged


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", required=True, choices=["avg", "tv"])
    p.add_argument("--experts", required=True)
    p.add_argument("--base")
    p.add_argument("--lam", type=float, default=1.0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if a.mode == "tv" and not a.base:
        p.error("--mode tv needs --base")
    started = time.perf_counter()
    experts = [read_expert(path) for path in a.experts.split(",")]
    base = read_base(a.base) if a.mode == "tv" else None
    loaded = time.perf_counter()
    merged = merge(a.mode, experts, base, a.lam)
    computed = time.perf_counter()
    torch.save({"net": merged}, a.out)
    saved = time.perf_counter()
    print(json.dumps({"load": loaded - started, "merge": computed - loaded, "save": saved - computed, "seconds": saved - started}))


if __name__ == "__main__":
    main()
