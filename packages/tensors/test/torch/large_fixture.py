"""Writes torch.save files whose tensors are larger than a buffer can hold, and prints torch's view of them.

python large_fixture.py sparse PATH NUMEL
    A torch.save zip of one float32 tensor of NUMEL zeros, its data a hole in a sparse file (a
    few KiB on disk). Laid out as torch.save lays it out (64-byte aligned data, zip64 records);
    torch.load(weights_only=True, mmap=True) reads it, and its SHA-256 is computed from torch's tensor.
python large_fixture.py expanded DIR
    torch.save of stride-0 views: DIR/views.pt holds "row" (1 GiB from a 4 KiB row) and "column"
    (256 MiB from one column); DIR/tib.pt holds "tib" (1 TiB from one element).
Prints JSON.
"""
import hashlib
import json
import struct
import sys
import zlib

import torch


def crc_of_zeros(n):
    crc, block = 0, bytes(64 << 20)
    while n > 0:
        take = min(n, len(block))
        crc = zlib.crc32(memoryview(block)[:take], crc)
        n -= take
    return crc


def sparse(path, numel):
    pickle_bytes = _pickle(numel)
    members = [("archive/data.pkl", pickle_bytes), ("archive/byteorder", b"little"),
               ("archive/data/0", numel * 4), ("archive/version", b"3\n")]
    central = []
    with open(path, "wb") as f:
        for name, data in members:
            size = data if isinstance(data, int) else len(data)
            offset = f.tell()
            nb = name.encode()
            zip64 = struct.pack("<HHQQ", 1, 16, size, size)
            base = offset + 30 + len(nb) + len(zip64) + 4
            pad = (64 - base % 64) % 64
            extra = zip64 + struct.pack("<HH", 0x4246, pad) + bytes(pad)
            crc = crc_of_zeros(size) if isinstance(data, int) else zlib.crc32(data)
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc,
                                0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(extra)) + nb + extra)
            if isinstance(data, int):
                f.seek(size, 1)  # the hole: zeros that take no disk
            else:
                f.write(data)
            central.append((nb, crc, size, offset))
        cd_start = f.tell()
        for nb, crc, size, offset in central:
            extra = struct.pack("<HHQQQ", 1, 24, size, size, offset)
            f.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc,
                                0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + nb + extra)
        cd_end = f.tell()
        n = len(central)
        f.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_end - cd_start, cd_start))
        f.write(struct.pack("<IIQI", 0x07064B50, 0, cd_end, 1))
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
    t = torch.load(path, weights_only=True, mmap=True)["w"]
    digest = hashlib.sha256()
    flat = t.view(-1)
    step = 64 << 20
    for start in range(0, flat.numel(), step):
        digest.update(flat[start:start + step].numpy().tobytes())
    return {"w": {"shape": list(t.shape), "dtype": str(t.dtype), "sha256": digest.hexdigest()}}


def _pickle(numel):
    """data.pkl as torch.save writes it for {"w": float32 tensor of numel}, without allocating one."""
    import io
    import pickle

    class Storage:
        pass

    buf = io.BytesIO()

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return ("storage", torch.FloatStorage, "0", "cpu", numel)
            return None

    from collections import OrderedDict
    from torch._utils import _rebuild_tensor_v2

    class T:
        def __reduce__(self):
            return (_rebuild_tensor_v2, (Storage(), 0, torch.Size([numel]), (1,), False, OrderedDict()))

    state = OrderedDict([("w", T())])
    P(buf, protocol=2).dump(state)
    return buf.getvalue()


def expanded(directory):
    row = torch.arange(1024, dtype=torch.float32)
    column = torch.arange(256, dtype=torch.float32).unsqueeze(1)
    views = {
        "row": row.expand(262144, 1024),
        "column": column.expand(256, 262144),
    }
    tib = torch.zeros(1, dtype=torch.float32).expand(2**38)
    torch.save(views, f"{directory}/views.pt")
    torch.save({"tib": tib}, f"{directory}/tib.pt")
    out = {}
    for name in ("row", "column"):
        t = views[name]
        digest = hashlib.sha256()
        for start in range(0, t.shape[0], 4096):
            digest.update(t[start:start + 4096].contiguous().numpy().tobytes())
        out[name] = {"shape": list(t.shape), "stride": list(t.stride()), "sha256": digest.hexdigest()}
    out["tib"] = {"shape": list(tib.shape), "stride": list(tib.stride())}
    return out


if __name__ == "__main__":
    kind, path = sys.argv[1], sys.argv[2]
    print(json.dumps(sparse(path, int(sys.argv[3])) if kind == "sparse" else expanded(path)))
