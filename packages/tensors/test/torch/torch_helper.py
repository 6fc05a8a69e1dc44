"""Real-PyTorch side of the torch interop tests (run with /usr/bin/python3, which has torch).

  save OUTDIR           save the test cases with torch.save; print {file: {tensor: digest}}
  variants SRC OUTDIR   rewrite SRC as the zip variants torch.load accepts (deflate, renamed prefix, unaligned, zip64 directory)
  load FILE...          torch.load each FILE (plain and weights_only=True); print digests, dict types and data offsets

A digest is {dtype, shape, sha256 of the contiguous little-endian bytes}.
"""
import collections
import hashlib
import json
import os
import struct
import sys
import zipfile

import torch

DTYPES = {
    torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}


def digest(t):
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "sha256": hashlib.sha256(raw).hexdigest()}


def walk(value, path, out):
    if isinstance(value, torch.Tensor):
        out[path] = digest(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            walk(v, f"{path}.{k}" if path else str(k), out)
    return out


def cases():
    g = torch.Generator().manual_seed(1234)
    rnd = lambda *s: torch.randn(*s, generator=g)
    dtypes = collections.OrderedDict()
    for dt in DTYPES:
        if dt == torch.bool:
            dtypes["bool"] = torch.rand(5, 3, generator=g) > 0.5
        elif dt.is_floating_point:
            dtypes[str(dt).replace("torch.", "")] = (rnd(4, 6) * 100).to(dt)
        else:
            info = torch.iinfo(dt)
            dtypes[str(dt).replace("torch.", "")] = torch.randint(info.min, info.max, (3, 7), generator=g, dtype=dt)
    base = torch.arange(24, dtype=torch.float32)
    cube = rnd(3, 4, 5)
    layouts = {
        "net": collections.OrderedDict(
            [
                ("a.weight", rnd(8, 4).to(torch.bfloat16)),
                ("transposed", torch.arange(6, dtype=torch.float32).reshape(2, 3).t()),
                ("offset", base[3:7]),
                ("view2d", base[4:10].view(2, 3)),
                ("every_other", base.view(4, 6)[:, ::2]),
                ("permuted", cube.permute(2, 0, 1)),
                ("column", cube[:, 1, :]),
                ("zero_d", torch.tensor(3.5, dtype=torch.float64)),
                ("zero_d_i64", torch.tensor(7)),
                ("empty", torch.empty(0, 4)),
                ("empty_view", base[5:5]),
            ]
        ),
        "ema": {"inner": {"w": rnd(2, 2).half()}},
        "step": 10,
        "name": "run-1",
    }
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    many = collections.OrderedDict((f"layer{i}.w", torch.full((2,), float(i))) for i in range(300))
    many["wide"] = torch.arange(70000, dtype=torch.int8)
    many["big_ints"] = torch.tensor([2**40, -(2**40), 2**31, -(2**31) - 1], dtype=torch.int64)
    params = {"p": torch.nn.Parameter(rnd(3, 3)), "frozen": torch.nn.Parameter(rnd(2), requires_grad=False)}
    return {"dtypes": dtypes, "layouts": layouts, "state_dict": model.state_dict(), "many": many, "params": params}


def save(outdir):
    result = {}
    for name, obj in cases().items():
        path = os.path.join(outdir, f"{name}.pt")
        torch.save(obj, path)
        result[f"{name}.pt"] = walk(obj, "", {})
    print(json.dumps(result))


def rewrite_zip64_directory(src, dst):
    """Rewrites a stored zip so every central-directory entry keeps its sizes and offset in a zip64 extra field."""
    data = open(src, "rb").read()
    eocd = data.rindex(b"PK\x05\x06")
    count, cd_size, cd_off = struct.unpack_from("<HII", data, eocd + 10)
    pos, entries = cd_off, []
    for _ in range(count):
        fields = list(struct.unpack_from("<IHHHHHHIIIHHHHHII", data, pos))
        n, e, c = fields[10], fields[11], fields[12]
        name = data[pos + 46 : pos + 46 + n]
        csize, usize, lho = fields[8], fields[9], fields[16]
        fields[8] = fields[9] = fields[16] = 0xFFFFFFFF
        fields[1] = fields[2] = 45
        extra = struct.pack("<HHQQQ", 1, 24, usize, csize, lho)
        fields[11] = len(extra)
        entries.append(struct.pack("<IHHHHHHIIIHHHHHII", *fields) + name + extra + data[pos + 46 + n + e : pos + 46 + n + e + c])
        pos += 46 + n + e + c
    cd = b"".join(entries)
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(cd), cd_off)
    loc = struct.pack("<IIQI", 0x07064B50, 0, cd_off + len(cd), 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    open(dst, "wb").write(data[:cd_off] + cd + z64 + loc + end)


def variants(src, outdir):
    with zipfile.ZipFile(src) as zin:
        members = [(i.filename, zin.read(i.filename)) for i in zin.infolist()]
    prefix = members[0][0].split("/")[0]

    def write(name, method, rename=None):
        with zipfile.ZipFile(os.path.join(outdir, name), "w", compression=method) as zout:
            for member, content in members:
                zout.writestr(rename + member[len(prefix):] if rename else member, content)

    write("deflate.pt", zipfile.ZIP_DEFLATED)
    write("renamed.pt", zipfile.ZIP_STORED, rename="foo")
    write("unaligned.pt", zipfile.ZIP_STORED)
    rewrite_zip64_directory(os.path.join(outdir, "unaligned.pt"), os.path.join(outdir, "zip64_directory.pt"))
    print(json.dumps(sorted(os.listdir(outdir))))


def describe(value):
    if isinstance(value, collections.OrderedDict):
        return {"type": "OrderedDict", "items": {str(k): describe(v) for k, v in value.items()}}
    if isinstance(value, dict):
        return {"type": "dict", "items": {str(k): describe(v) for k, v in value.items()}}
    if isinstance(value, torch.Tensor):
        return {"type": "tensor"}
    return {"type": type(value).__name__, "value": value}


def load_one(path):
    plain = torch.load(path)
    try:
        safe = walk(torch.load(path, weights_only=True), "", {})
    except Exception as e:  # reported, so a test can tell which loader refused
        safe = {"error": str(e)[-200:]}
    with zipfile.ZipFile(path) as z:
        offsets = {}
        for info in z.infolist():
            with open(path, "rb") as f:
                f.seek(info.header_offset)
                head = f.read(30)
                n, e = struct.unpack_from("<HH", head, 26)
                offsets[info.filename] = info.header_offset + 30 + n + e
    return {
        "tensors": walk(plain, "", {}),
        "weightsOnly": safe,
        "tree": describe(plain),
        "dataOffsets": offsets,
    }


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "save":
        save(sys.argv[2])
    elif command == "variants":
        variants(sys.argv[2], sys.argv[3])
    elif command == "load":
        print(json.dumps({os.path.basename(p): load_one(p) for p in sys.argv[2:]}))
    else:
        raise SystemExit(f"unknown command {command}")
