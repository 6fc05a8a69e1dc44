"""Writes torch.distributed.checkpoint (DCP) directories for the ckpt DCP tests.

Real DCP output is tools/fixtures/make_dcp_fixtures.py's (real-dcp.test.ts). This script writes what
real DCP never does: pickle protocols 2/4/5 and a hostile corpus. It pickles STAND-IN classes that
carry torch's own module and class names and fields, following torch/distributed/checkpoint/metadata.py
and filesystem.py (torch 2.x): Metadata, TensorStorageMetadata, ChunkStorageMetadata,
BytesStorageMetadata, TensorProperties (pickled as a tuple through __getstate__, with the
_MEM_FORMAT_ENCODING enum), StorageMeta, MetadataIndex (frozen) and _StorageInfo (None fields
dropped by __getstate__); torch.Size, dtypes and layouts are stand-ins too (no torch import, so it
starts in a moment).

Usage: python3 make_dcp_fixture.py ROOT  -> ROOT/{p2,p4,p5,evil,unsafe} and ROOT/hostile/<case>;
prints {"valid": expectations, "hostile": {case: {"code", "tensor"?}}} as JSON.
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

META = "torch.distributed.checkpoint.metadata"
FS = "torch.distributed.checkpoint.filesystem"
for name in ("torch", "torch.distributed.checkpoint", META, FS):
    sys.modules[name] = types.ModuleType(name)
torch = sys.modules["torch"]


class _TorchConstant:
    """A torch module constant (dtype, layout, memory format): pickles as the global torch.<name>."""

    def __init__(self, name):
        self.name = name
        self.__module__ = "torch"
        setattr(torch, name, self)

    def __reduce__(self):
        return self.name

    def __str__(self):
        return f"torch.{self.name}"


class Size(tuple):
    def __reduce__(self):
        return (Size, (tuple(self),))

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n


Size.__module__ = "torch"
torch.Size = Size
for constant in ("bfloat16", "float32", "int64", "strided", "contiguous_format"):
    _TorchConstant(constant)
torch.get_default_dtype = lambda: torch.float32
torch.dtype = torch.layout = torch.memory_format = object


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


PIECE = 16  # bytes per stored chunk in the hostile cases


def hostile(outdir, tensors, *, storage_edit=None, files_edit=None, planner_data=None, raw=None):
    """A DCP directory whose .metadata holds `tensors` ({fqn: (shape, [(offsets, sizes)])}), each
    chunk PIECE bytes in __0_0.distcp, with `storage_edit(storage)` / `files_edit(files)` applied."""
    os.makedirs(outdir)
    sdm, storage, cursor = {}, {}, 0
    for fqn, (shape, chunks) in tensors.items():
        metas = []
        for i, (offsets, sizes) in enumerate(chunks):
            metas.append(ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes)))
            storage[MetadataIndex(fqn, offsets, i)] = _StorageInfo("__0_0.distcp", cursor, PIECE)
            cursor += PIECE
        sdm[fqn] = TensorStorageMetadata(TensorProperties(dtype=torch.float32), shape, metas)
    if storage_edit:
        storage_edit(storage)
    files = {"__0_0.distcp": cursor}
    if files_edit:
        files_edit(files)
    meta = Metadata(sdm, planner_data=planner_data, storage_data=storage, version="1.0.0")
    data = raw(meta) if raw else pickle.dumps(meta, protocol=4)
    with open(os.path.join(outdir, ".metadata"), "wb") as f:
        f.write(data)
    for path, size in files.items():
        with open(os.path.join(outdir, path), "wb") as f:
            f.write(bytes(size))


class _Reduce:
    """An object whose unpickling calls `fn(*args)`: what a hostile pickle smuggles in."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def set_path(path):
    def edit(storage):
        key = next(iter(storage))
        storage[key] = _StorageInfo(path, 0, PIECE)
    return edit


def set_length(length):
    def edit(storage):
        key = next(iter(storage))
        storage[key] = _StorageInfo("__0_0.distcp", 0, length)
    return edit


W = "model.w"
HALVES = [((0, 0), (2, 4)), ((2, 0), (2, 4))]
memo_chunk = ChunkStorageMetadata(torch.Size((0,)), torch.Size((1,)))
HOSTILE = {
    # --- the pickle reaches for other globals: refused by name, never called
    "global-os-system": ({W: ((4, 4), HALVES)}, {"planner_data": {W: _Reduce(os.system, "true")}}, "PICKLE_GLOBAL_REFUSED", None),
    "global-builtins-eval": ({W: ((4, 4), HALVES)}, {"planner_data": {W: _Reduce(eval, "1")}}, "PICKLE_GLOBAL_REFUSED", None),
    "getattr-enum-method": ({W: ((4, 4), HALVES)}, {"planner_data": {W: _Reduce(getattr, _MEM_FORMAT_ENCODING, "__subclasses__")}}, "PICKLE_CALL_REFUSED", None),
    "not-metadata": ({}, {"raw": lambda meta: pickle.dumps({"state_dict_metadata": {}}, protocol=4)}, "DCP_METADATA_INVALID", None),
    "truncated-pickle": ({W: ((4, 4), HALVES)}, {"raw": lambda meta: pickle.dumps(meta, protocol=4)[:-40]}, "PICKLE_TRUNCATED", None),
    # --- chunks that do not tile the global shape
    "chunks-overlap": ({W: ((4, 4), [((0, 0), (3, 4)), ((2, 0), (2, 4))])}, {}, "DCP_CHUNK_OVERLAP", W),
    "chunks-gap": ({W: ((4, 4), [((0, 0), (2, 4)), ((3, 0), (1, 4))])}, {}, "DCP_CHUNK_GAP", W),
    "chunks-gap-2d": ({W: ((4, 4), [((0, 0), (2, 2)), ((0, 2), (2, 2)), ((2, 0), (2, 2))])}, {}, "DCP_CHUNK_GAP", W),
    "chunk-duplicate": ({W: ((4, 4), HALVES + [HALVES[1]])}, {}, "DCP_CHUNK_DUPLICATE", W),
    "no-chunks": ({W: ((4, 4), [])}, {}, "DCP_CHUNK_GAP", W),
    "chunk-outside-shape": ({W: ((4, 4), [((0, 0), (2, 4)), ((2, 0), (3, 4))])}, {}, "DCP_METADATA_INVALID", W),
    "chunk-size-negative": ({W: ((4, 4), [((0, 0), (4, 4)), ((4, 0), (-1, 4))])}, {}, "DCP_METADATA_INVALID", W),
    "chunk-offset-negative": ({W: ((4, 4), [((-2, 0), (2, 4)), ((0, 0), (4, 4))])}, {}, "DCP_METADATA_INVALID", W),
    "shape-2pow80": ({W: ((2**80,), [((0,), (1,))])}, {}, "DCP_METADATA_INVALID", W),
    "shape-2pow80-product": ({W: ((2**40, 2**40), [((0, 0), (1, 1))])}, {}, "DCP_METADATA_INVALID", W),
    # One memoised chunk listed 10^6 times: a few MB of pickle, refused before any work per chunk.
    "chunks-1e6": ({W: ((1,), [((0,), (1,))])}, {"raw": lambda meta: pickle.dumps(million(meta), protocol=4)}, "DCP_CHUNKS_TOO_MANY", W),
    # A staircase of 2100 chunks cuts the shape into 2100^2 grid cells: more than the tiling check marks.
    "chunks-irregular": ({W: ((2100, 2100), [((i, i), (1, 1)) for i in range(2100)])}, {}, "DCP_CHUNKS_TOO_MANY", W),
    # --- storage entries and files
    "chunk-unstored": ({W: ((4, 4), HALVES)}, {"storage_edit": lambda st: st.pop(next(iter(st)))}, "DCP_CHUNK_UNSTORED", W),
    "storage-length-negative": ({W: ((4, 4), HALVES)}, {"storage_edit": set_length(-5)}, "DCP_METADATA_INVALID", W),
    "storage-past-file": ({W: ((4, 4), HALVES)}, {"storage_edit": set_length(10**9)}, "DCP_FILE_SHORT", W),
    "file-short": ({W: ((4, 4), HALVES)}, {"files_edit": lambda f: f.update({"__0_0.distcp": PIECE + 3})}, "DCP_FILE_SHORT", W),
    "file-missing": ({W: ((4, 4), HALVES)}, {"files_edit": lambda f: f.clear()}, "DCP_FILE_MISSING", W),
    "file-extra": ({W: ((4, 4), HALVES)}, {"files_edit": lambda f: f.update({"__1_0.distcp": 8})}, "DCP_FILE_UNEXPECTED", None),
    # --- storage paths leaving the directory: refused while parsing, before any file is touched
    "path-dotdot": ({W: ((4, 4), HALVES)}, {"storage_edit": set_path("../outside.distcp")}, "DCP_PATH_UNSAFE", None),
    "path-dotdot-inner": ({W: ((4, 4), HALVES)}, {"storage_edit": set_path("a/../../outside.distcp")}, "DCP_PATH_UNSAFE", None),
    "path-absolute": ({W: ((4, 4), HALVES)}, {"storage_edit": set_path("/etc/passwd")}, "DCP_PATH_UNSAFE", None),
    "path-nul": ({W: ((4, 4), HALVES)}, {"storage_edit": set_path("__0_0.distcp\0.x")}, "DCP_PATH_UNSAFE", None),
    "path-backslash": ({W: ((4, 4), HALVES)}, {"storage_edit": set_path("..\\outside.distcp")}, "DCP_PATH_UNSAFE", None),
    "path-url": ({W: ((4, 4), HALVES)}, {"storage_edit": set_path("s3://bucket/x.distcp")}, "DCP_PATH_UNSAFE", None),
}


def million(meta):
    meta.state_dict_metadata[W].chunks = [memo_chunk] * 10**6
    return meta


root = sys.argv[1]
result = {f"p{p}": build(os.path.join(root, f"p{p}"), p) for p in (2, 4, 5)}
build(os.path.join(root, "evil"), 4, planner_data={"hook": os.system})
build(os.path.join(root, "unsafe"), 4, path_override="../outside.distcp")
expected_hostile = {}
for name, (tensors, options, code, tensor) in HOSTILE.items():
    hostile(os.path.join(root, "hostile", name), tensors, **options)
    expected_hostile[name] = {"code": code, **({"tensor": tensor} if tensor else {})}
print(json.dumps({"valid": result, "hostile": expected_hostile}))
