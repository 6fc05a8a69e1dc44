"""torch.distributed.checkpoint storage that hashes every file as it writes it (PyTorch 2).

``HashingFileSystemWriter`` is a ``FileSystemWriter`` whose writer threads feed each byte they
write to SHA-256 on its way to the file: no file is read back. Each rank's write results carry
the size and digest of the file their item landed in; DCP's own gather brings them to the
coordinator (rank 0), whose ``finish`` strips them again before the ``.metadata`` is pickled (a
stock ``FileSystemReader`` loads the checkpoint) and keeps them, with the ``.metadata``'s own, as
``writer.inventory``. Rank 0 hands that inventory to ``commit``, so the sidecar records the digests
instead of hashing the checkpoint again::

    import torch.distributed.checkpoint as dcp
    from ckpt_dcp import HashingFileSystemWriter, HashingFileSystemReader, inventory_of

    writers = {name: HashingFileSystemWriter(save.targets[name]) for name in save.directories}
    for name, writer in writers.items():
        dcp.save(state[name], storage_writer=writer)
    group.commit(save, inventory=inventory_of(writers, save.dir))   # used on rank 0

    # resume: each file is checked against the digest the checkpoint's manifest records
    reader = HashingFileSystemReader.from_manifest(point.iter_dir, "model")
    dcp.load(state["model"], storage_reader=reader)

This module imports torch; ``ckpt_trainer_client`` does not, so trainers without PyTorch 2 keep
using the client alone.
"""

import dataclasses
import hashlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from torch.distributed.checkpoint.filesystem import FileSystem, FileSystemReader, FileSystemWriter, _StorageInfo
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

__all__ = [
    "CkptDcpError",
    "HashingFileSystemReader",
    "HashingFileSystemWriter",
    "inventory_of",
    "refusal_of",
]

# What describes a checkpoint directory, per file: a full checkpoint's description (the manager's
# CHECKPOINT_DESCRIPTION_FILE), else a partial artifact's manifest (@ckpt/manifest's ARTIFACT_MANIFEST_FILE).
DESCRIPTION_FILES = (".posttrain-checkpoint.json", ".posttrain-checkpoint-artifact.json")
# Files are checked on read in pieces of this size: bounded memory whatever the shard's size.
_READ_CHUNK = 8 << 20
# Writes from this size on are hashed on a thread beside the write; smaller ones inline, where a
# thread hand-off would cost more than it hides.
_OVERLAP_MIN = 1 << 20


class CkptDcpError(Exception):
    """A refusal of the hashing storage. ``code`` is stable: ``DCP_DIGEST_MISMATCH`` (a file's bytes
    are not the ones written), ``DCP_DIGEST_MISSING`` (no recorded digest for a file being read),
    ``DCP_WRITE_NOT_SEQUENTIAL`` (a writer tried to seek, so the stream digest would be wrong),
    ``DCP_MANIFEST_UNREADABLE`` (the checkpoint's manifest is missing or has no such directory component)."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.detail = message

    def __reduce__(self):
        # DCP gathers a rank's failure to the coordinator by pickling it.
        return (CkptDcpError, (self.code, self.detail))


def refusal_of(error):
    """The CkptDcpError behind a failed ``dcp.load``/``dcp.save`` (DCP wraps each rank's exception
    in a ``CheckpointException``, a BaseException), or None when the failure is another one."""
    if isinstance(error, CkptDcpError):
        return error
    for failure in getattr(error, "failures", {}).values():
        cause = failure[0] if isinstance(failure, tuple) else failure
        if isinstance(cause, CkptDcpError):
            return cause
    return None


@dataclasses.dataclass
class _HashedStorageInfo(_StorageInfo):
    """A write result's storage info plus the size and digest of the whole file it is in; lives
    only between ``write_data`` and ``finish`` (never pickled into ``.metadata``)."""

    file_size: int = 0
    file_sha256: str = ""

    def plain(self):
        return _StorageInfo(self.relative_path, self.offset, self.length, self.transform_descriptors)


class _HashingStream:
    """A write-only, append-only file stream that hashes what it writes. It has no ``seek``: a
    writer that moved backwards would make the running digest describe other bytes.

    A large write is hashed on a thread of the stream's own while this thread writes it: a save
    waits on the page cache's writeback most of the time, and the hash fills that wait instead of
    adding to it. ``write`` returns only when both are done, so the caller may reuse its buffer."""

    def __init__(self, raw, path):
        self._raw = raw
        self._path = path
        self._sha = hashlib.sha256()
        self._hasher = None
        self.size = 0

    def _write_all(self, view):
        done = 0
        while done < len(view):
            written = self._raw.write(view[done:])
            done += len(view) - done if written is None else written

    def write(self, data):
        view = memoryview(data).cast("B")
        if len(view) < _OVERLAP_MIN:
            self._write_all(view)
            self._sha.update(view)
        else:
            if self._hasher is None:
                self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-dcp-sha256")
            # hashlib drops the GIL on large buffers, and so does the file write: both run at once.
            hashed = self._hasher.submit(self._sha.update, view)
            try:
                self._write_all(view)
            finally:
                hashed.result()
        self.size += len(view)
        return len(view)

    def writable(self):
        return True

    def tell(self):
        return self.size

    def seek(self, *_args):
        raise CkptDcpError("DCP_WRITE_NOT_SEQUENTIAL", "%s: a DCP writer tried to seek; the hashing writer only "
                           "appends. Use the stock FileSystemWriter for this serialization format" % self._path)

    def flush(self):
        self._raw.flush()

    def fileno(self):
        return self._raw.fileno()

    def close(self):
        if self._hasher is not None:
            self._hasher.shutdown()
        self._raw.close()

    def hexdigest(self):
        return self._sha.hexdigest()


class _HashingFileSystem(FileSystem):
    """DCP's local file system, with every file opened for writing hashed on the way. Digests are
    kept by file name (the writer threads finish files concurrently, hence the lock); a renamed file
    (the ``.metadata.tmp`` DCP moves into place) keeps its digest under its new name."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self.written = {}

    @contextmanager
    def create_stream(self, path, mode):
        if mode != "wb":
            with super().create_stream(path, mode) as stream:
                yield stream
            return
        with super().create_stream(path, mode) as raw:
            stream = _HashingStream(raw, path)
            yield stream
        with self._lock:
            self.written[Path(path).name] = (stream.size, stream.hexdigest())

    def rename(self, path, new_path):
        super().rename(path, new_path)
        with self._lock:
            record = self.written.pop(Path(path).name, None)
            if record is not None:
                self.written[Path(new_path).name] = record


class HashingFileSystemWriter(FileSystemWriter):
    """A ``FileSystemWriter`` (same arguments) that hashes each file while writing it.

    After ``dcp.save`` returns, ``inventory`` on the coordinator (rank 0) lists every file of the
    checkpoint directory (each rank's shards and ``.metadata``) as ``{"path", "size", "sha256"}``,
    paths relative to the directory; on other ranks it is None."""

    def __init__(self, path, *args, **kwargs):
        super().__init__(path, *args, **kwargs)
        self.fs = _HashingFileSystem()
        self.inventory = None

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        self.fs = _HashingFileSystem()
        self.inventory = None

    def write_data(self, plan, planner):
        # FileSystemWriter writes every file before it returns its (completed) future.
        results = super().write_data(plan, planner).wait()
        files = dict(self.fs.written)
        hashed = []
        for result in results:
            info = result.storage_data
            size, sha256 = files[info.relative_path]
            hashed.append(dataclasses.replace(result, storage_data=_HashedStorageInfo(
                info.relative_path, info.offset, info.length, info.transform_descriptors, size, sha256)))
        return _completed(hashed)

    def finish(self, metadata, results):
        shards = {}
        plain = []
        for rank_results in results:
            plain_rank = []
            for result in rank_results:
                info = result.storage_data
                if isinstance(info, _HashedStorageInfo):
                    shards[info.relative_path] = (info.file_size, info.file_sha256)
                    info = info.plain()
                plain_rank.append(WriteResult(index=result.index, size_in_bytes=result.size_in_bytes,
                                              storage_data=info))
            plain.append(plain_rank)
        super().finish(metadata, plain)
        files = dict(shards)
        files.update(self.fs.written)  # the .metadata, written by this coordinator just now
        self.inventory = [{"path": name, "size": size, "sha256": sha256}
                          for name, (size, sha256) in sorted(files.items())]


def _completed(value):
    future = Future()
    future.set_result(value)
    return future


def inventory_of(writers, save_dir):
    """The commit inventory of several hashing writers (e.g. ``{"model": w1, "optim": w2}``): every
    file each wrote, paths relative to ``save_dir`` (``model/__0_0.distcp``). None off the coordinator."""
    entries = []
    for writer in writers.values():
        if writer.inventory is None:
            return None
        prefix = Path(os.path.relpath(writer.path, save_dir)).as_posix()
        entries.extend(dict(entry, path="%s/%s" % (prefix, entry["path"])) for entry in writer.inventory)
    return sorted(entries, key=lambda e: e["path"])


class _VerifyingFileSystem(FileSystem):
    """DCP's local file system, checking each file's SHA-256 against its recorded digest before
    handing it to the loader."""

    def __init__(self, expected):
        super().__init__()
        self._expected = expected
        self._lock = threading.Lock()
        self._verified = set()

    @contextmanager
    def create_stream(self, path, mode):
        if mode == "rb":
            self._verify(Path(path))
        with super().create_stream(path, mode) as stream:
            yield stream

    def _verify(self, path):
        name = path.name
        with self._lock:
            if name in self._verified:
                return
        expected = self._expected.get(name)
        if expected is None:
            raise CkptDcpError("DCP_DIGEST_MISSING", "%s: no recorded digest for this file; resume from a "
                               "checkpoint saved with HashingFileSystemWriter, or load it with FileSystemReader" % path)
        sha = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(_READ_CHUNK), b""):
                sha.update(chunk)
        if sha.hexdigest() != expected:
            raise CkptDcpError("DCP_DIGEST_MISMATCH", "%s: SHA-256 %s, but %s was recorded when it was written; the "
                               "file changed since (disk or copy corruption). Resume from another checkpoint"
                               % (path, sha.hexdigest(), expected))
        with self._lock:
            self._verified.add(name)


class HashingFileSystemReader(FileSystemReader):
    """A ``FileSystemReader`` that refuses any file whose SHA-256 is not the recorded one.

    ``expected`` maps each file name of the checkpoint directory (``__0_0.distcp``, ``.metadata``)
    to its digest; ``from_manifest`` takes them from the checkpoint's artifact manifest."""

    def __init__(self, path, expected, *args, **kwargs):
        super().__init__(path, *args, **kwargs)
        self.fs = _VerifyingFileSystem(dict(expected))

    @classmethod
    def from_manifest(cls, iter_dir, component, *args, **kwargs):
        """The reader of directory component ``component`` of the checkpoint ``iter_dir``, checked
        against the per-file digests its description (``DESCRIPTION_FILES``) records."""
        paths = [os.path.join(iter_dir, name) for name in DESCRIPTION_FILES]
        manifest_path = next((p for p in paths if os.path.exists(p)), paths[0])
        try:
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
            entry = next(c for c in manifest["physical_components"] if c["name"] == component and c["kind"] == "dir")
            files = entry["files"]
        except (OSError, ValueError, KeyError, TypeError, StopIteration) as error:
            raise CkptDcpError("DCP_MANIFEST_UNREADABLE", "%s: cannot read the directory component %r from it (%s)"
                               % (manifest_path, component, error)) from error
        unhashed = [f["path"] for f in files if "sha256" not in f]
        if unhashed:
            raise CkptDcpError("DCP_DIGEST_MISSING", "%s records no digest for %s of %r: they were not hashed as "
                               "they were written, or the sidecar that committed them does not record inventories. "
                               "Load them with FileSystemReader" % (manifest_path, ", ".join(unhashed[:5]), component))
        expected = {f["path"]: f["sha256"] for f in files}
        return cls(os.path.join(iter_dir, entry["path"]), expected, *args, **kwargs)
