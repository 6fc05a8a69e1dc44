"""Writes torch.distributed.checkpoint (DCP) directories for the ckpt DCP tests.

Debian's torch 1.13 cannot import torch.distributed.checkpoint under Python 3.11, so this script
pickles STAND-IN classes that carry torch's own module and class names and fields, following the
current torch/distributed/checkpoint/metadata.py and filesystem.py (torch 2.x): Metadata,
TensorStorageMetadata, ChunkStorageMetadata, BytesStorageMetadata, TensorProperties (pickled as a
tuple through __getstate__, with the _MEM_FORMAT_ENCODING enum), StorageMeta, MetadataIndex (frozen)
and _StorageInfo (None fields dropped by __getstate__). torch.Size, dtypes and layouts are real.

Usage: /usr/bin/python3 make_dcp_fixture.py ROOT  -> ROOT/{p2,p4,p5,evil,unsafe}; prints the expectations as JSON.
"""
import dataclasses
import enum
import json
import os
import pathlib
import pickle
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

META = "torch.distributed.checkpoint.metadata"
FS = "torch.distributed.checkpoint.filesystem"
for name in ("torch.distributed.checkpoint", META, FS):
    sys.modules[name] = types.ModuleType(name)


def register(module):
    def wrap(cls):
        cls.__module__ = module
        setattr(sys.modules[module], cls.__name__, cls)
        return cls
    return wrap


@register(META)
@dataclass
class ChunkStorageMetadata:
    offsets: torch.Size
    sizes: torch.Size


@register(META)
class _MEM_FORMAT_ENCODING(enum.Enum):
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


@register(META)
@dataclass
class TensorProperties:
    dtype: torch.dtype = field(default_factory=torch.get_default_dtype)
    layout: torch.layout = field(default=torch.strided)
    requires_grad: bool = False
    memory_format: torch.memory_format = field(default=torch.contiguous_format)
    pin_memory: bool = False

    def __getstate__(self):
        return (self.dtype, self.layout, self.requires_grad, _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT, self.pin_memory)

    def __setstate__(self, state):
        self.dtype, self.layout, self.requires_grad, _, self.pin_memory = state
        self.memory_format = torch.contiguous_format


@register(META)
@dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: torch.Size
    chunks: list


@register(META)
@dataclass
class BytesStorageMetadata:
    pass


@register(META)
@dataclass
class StorageMeta:
    checkpoint_id: Any = None
    save_id: Optional[str] = None
    load_id: Optional[str] = None
    modules: list = field(default_factory=list)


@register(META)
@dataclass
class Metadata:
    state_dict_metadata: dict
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Optional[StorageMeta] = None
    version: Optional[str] = None


@register(META)
@dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: Optional[torch.Size] = None
    index: Optional[int] = field(hash=False, compare=False, default=None)

    def __init__(self, fqn, offset=None, index=None):
        object.__setattr__(self, "fqn", fqn)
        object.__setattr__(self, "index", index)
        if offset is not None:
            object.__setattr__(self, "offset", torch.Size(offset))


@register(FS)
@dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int
    transform_descriptors: Optional[list] = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if v is not None}


ITEM = {torch.bfloat16: 2, torch.float32: 4, torch.int64: 8}


def build(outdir, protocol, planner_data=None, path_override=None):
    os.makedirs(outdir)
    tensors = {
        "model.w": (torch.bfloat16, (8, 4), [((0, 0), (4, 4), "__0_0.distcp"), ((4, 0), (4, 4), "__1_0.distcp")]),
        "model.b": (torch.float32, (4,), [((0,), (4,), "__0_0.distcp")]),
        "optim.step": (torch.int64, (), [((), (), "__1_0.distcp")]),
    }
    sdm, storage, cursor, expected = {}, {}, {}, {"tensors": [], "files": {}}
    for fqn, (dtype, shape, chunks) in tensors.items():
        metas, out_chunks = [], []
        for i, (offsets, sizes, path) in enumerate(chunks):
            metas.append(ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes)))
            length = ITEM[dtype] * int(torch.Size(sizes).numel()) + 700  # a torch.save'd chunk has a zip around it
            path = path_override or path
            storage[MetadataIndex(fqn, offsets, i)] = _StorageInfo(path, cursor.get(path, 0), length)
            out_chunks.append({"offsets": list(offsets), "sizes": list(sizes), "storage": {
                "relativePath": path, "offset": cursor.get(path, 0), "length": length, "transformDescriptors": []}})
            cursor[path] = cursor.get(path, 0) + length
        sdm[fqn] = TensorStorageMetadata(TensorProperties(dtype=dtype), torch.Size(shape), metas)
        expected["tensors"].append({"fqn": fqn, "torchDtype": str(dtype).replace("torch.", ""), "shape": list(shape), "chunks": out_chunks})
    sdm["extra_state"] = BytesStorageMetadata()
    storage[MetadataIndex("extra_state")] = _StorageInfo("__0_0.distcp", cursor.get("__0_0.distcp", 0), 33, ["zstd"])
    expected["bytes"] = [{"fqn": "extra_state", "storage": {"relativePath": "__0_0.distcp", "offset": cursor.get("__0_0.distcp", 0), "length": 33, "transformDescriptors": ["zstd"]}}]
    cursor["__0_0.distcp"] = cursor.get("__0_0.distcp", 0) + 33
    meta = Metadata(
        sdm,
        planner_data=planner_data if planner_data is not None else {"model.w": ("model", "w")},
        storage_data=storage,
        storage_meta=StorageMeta(checkpoint_id=pathlib.PurePosixPath(outdir), save_id="abc"),
        version="1.0.0",
    )
    with open(os.path.join(outdir, ".metadata"), "wb") as f:
        pickle.dump(meta, f, protocol=protocol)
    if path_override is None:
        for path, size in cursor.items():
            with open(os.path.join(outdir, path), "wb") as f:
                f.write(os.urandom(size))
    expected["files"] = cursor
    return expected


root = sys.argv[1]
result = {f"p{p}": build(os.path.join(root, f"p{p}"), p) for p in (2, 4, 5)}
build(os.path.join(root, "evil"), 4, planner_data={"hook": os.system})
build(os.path.join(root, "unsafe"), 4, path_override="../outside.distcp")
print(json.dumps(result))
