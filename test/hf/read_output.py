"""Independent check of a materialized Hugging Face directory, with json + struct + numpy + torch only.

    /usr/bin/python3 read_output.py <out-dir> <base-dir> <model.pt>

Reads every output shard byte by byte (8-byte little-endian header length, JSON header, data),
checks each shard's size is 8 + header + data and its keys are the index's, checks the output
index lists exactly the base index's keys in the same shards, and compares every tensor bit for bit
with what torch.load of model.pt gives under the layouts documented in tools/fixtures/README.md:
same key -> same tensor; per-expert base keys from stacked fused checkpoint tensors
(gate = gate_up[e, :, :I].T, up = gate_up[e, :, I:].T, down = down_proj[e].T); stacked fused base
tensors from per-expert checkpoint keys (the inverse). Prints a JSON report."""
import json
import os
import re
import struct
import sys

import numpy as np
import torch

NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<u2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
         "I8": "i1", "U8": "u1", "BOOL": "?"}


def read_dir(path):
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        index = json.load(f)
    tensors, problems = {}, []
    for shard in sorted(set(index["weight_map"].values())):
        with open(os.path.join(path, shard), "rb") as f:
            data = f.read()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n].decode("utf-8"))
        header.pop("__metadata__", None)
        end = max((info["data_offsets"][1] for info in header.values()), default=0)
        if len(data) != 8 + n + end:
            problems.append(f"{shard}: {len(data)} bytes, header says {8 + n + end}")
        want = sorted(k for k, v in index["weight_map"].items() if v == shard)
        if sorted(header) != want:
            problems.append(f"{shard}: keys differ from the index's")
        for name, info in header.items():
            begin, stop = info["data_offsets"]
            arr = np.frombuffer(data[8 + n + begin:8 + n + stop], dtype=NUMPY[info["dtype"]]).reshape(info["shape"])
            tensors[name] = (info["dtype"], arr)
    return index, tensors, problems


def bits(t):
    t = t.contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def expected(name, shape, sd):
    if name in sd:
        return sd[name]
    m = re.match(r"^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$", name)
    if m:
        prefix, e, part = m.group(1), int(m.group(2)), m.group(3)
        if part == "down":
            return sd[f"{prefix}.down_proj"][e].t()
        gate_up = sd[f"{prefix}.gate_up_proj"][e]
        half = gate_up.shape[1] // 2
        return (gate_up[:, :half] if part == "gate" else gate_up[:, half:]).t()
    m = re.match(r"^(.*\.mlp\.experts)\.(gate_up|down)_proj$", name)
    if m:
        prefix, which = m.group(1), m.group(2)
        experts = shape[0]
        if which == "down":
            return torch.stack([sd[f"{prefix}.{e}.down_proj.weight"].t() for e in range(experts)])
        return torch.stack([torch.cat([sd[f"{prefix}.{e}.gate_proj.weight"].t(), sd[f"{prefix}.{e}.up_proj.weight"].t()], 1)
                            for e in range(experts)])
    raise KeyError(name)


def main(out, base, model):
    index, tensors, problems = read_dir(out)
    with open(os.path.join(base, "model.safetensors.index.json")) as f:
        base_index = json.load(f)
    if index["weight_map"] != base_index["weight_map"]:
        problems.append("the output index's weight_map differs from the base's")
    sd = torch.load(model)["net"]
    compared = 0
    for name, (dtype, arr) in tensors.items():
        try:
            want = bits(expected(name, list(arr.shape), sd))
        except KeyError:
            problems.append(f"{name}: no source")
            continue
        if list(want.shape) != list(arr.shape) or not np.array_equal(want, arr):
            problems.append(f"{name}: differs from the checkpoint")
        compared += 1
    json.dump({"tensors": len(tensors), "compared": compared, "problems": problems}, sys.stdout)


main(*sys.argv[1:4])
