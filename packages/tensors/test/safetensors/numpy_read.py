"""Independent reader for the tests: parses a safetensors file (or a directory with
model.safetensors.index.json) with json + numpy only and prints {name: {dtype, shape, values}}.
BF16 (unknown to numpy) is reported as raw uint16 bit patterns."""
import json
import os
import struct
import sys

import numpy as np

NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
         "I16": "<i2", "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?"}


def read_file(path, out):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    body = data[8 + n:]
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(body[begin:end], dtype=NUMPY[info["dtype"]]).reshape(info["shape"])
        out[name] = {"dtype": info["dtype"], "shape": list(arr.shape), "values": arr.reshape(-1).tolist()}


def main(path):
    out = {}
    if os.path.isdir(path):
        with open(os.path.join(path, "model.safetensors.index.json")) as f:
            index = json.load(f)
        for shard in sorted(set(index["weight_map"].values())):
            read_file(os.path.join(path, shard), out)
    else:
        read_file(path, out)
    json.dump(out, sys.stdout)


main(sys.argv[1])
