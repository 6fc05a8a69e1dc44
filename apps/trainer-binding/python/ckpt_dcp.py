"""torch.distributed.checkpoint storage that hashes every file as it writes it (PyTorch 2).

``HashingFileSystemWriter`` is a ``FileSystemWriter`` whose writer threads feed each byte they
write to SHA-256 on its way to the file: no file is read back. Each rank's write results carry
the size and digest of the file their item landed in; DCP's own gather brings them to the
coordinator (rank 0), whose ``finish`` strips them again before the ``.metadata`` is pickled (a
stock ``FileSystemReader`` loads the checkpoint) and keeps them, with the ``.metadata``'s own, as
``writer.inventory``. Rank 0 hands that inventory to ``commit``, so the sidecar records the digests
instead of hashing the checkpoint again. The SHA-256 replaces the CRC-32 of each ``torch.save``
zip record, which the writer's threads skip (``torch.load`` does not check it)::

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

import bisect
import ctypes
import dataclasses
import hashlib
import io
import json
import os
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.serialization as _torch_serialization
from torch.distributed.checkpoint.filesystem import (
    FileSystem,
    FileSystemBase,
    FileSystemReader,
    FileSystemWriter,
    _StorageInfo,
)
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

__all__ = [
    "CkptDcpError",
    "DataProcess",
    "DirectReader",
    "DirectWriter",
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
# Writes below this size are copied for the hashing thread (torch.save's zip headers and pickles).
_COPY_MAX = 1 << 20
# How much lower than its writer a hashing thread runs (see _yield_to_writes).
_HASH_NICE = 5

# Threads now writing a file whose SHA-256 ckpt records (see _skipping_zip_crc).
_zip_crc = threading.local()


def _install_zip_crc_switch():
    """Lets a thread that writes into a hashed file skip the CRC-32 ``torch.save`` computes for each
    zip record (0.27 CPU-s per GiB here, a fifth of a save's CPU): the file's SHA-256, recorded and
    checked on resume, supersedes it, and ``torch.load`` (so ``dcp.load``) does not check it; this is
    what ``torch.serialization.set_crc32_options(False)`` does, but for that thread only, so other
    threads' ``torch.save`` calls keep their CRCs. Only where torch asks ``get_crc32_options`` on
    every save (torch 2.6 on); elsewhere nothing changes."""
    original = getattr(_torch_serialization, "get_crc32_options", None)
    if original is None or getattr(original, "ckpt_thread_switch", False):
        return

    def get_crc32_options():
        return False if getattr(_zip_crc, "skip", 0) else original()

    get_crc32_options.ckpt_thread_switch = True
    _torch_serialization.get_crc32_options = get_crc32_options


_install_zip_crc_switch()


@contextmanager
def _skipping_zip_crc():
    """While open, ``torch.save`` on this thread writes zip records without a CRC-32."""
    _zip_crc.skip = getattr(_zip_crc, "skip", 0) + 1
    try:
        yield
    finally:
        _zip_crc.skip -= 1




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


class _AppendOnlyStream:
    """What DCP asks of a write stream that only appends: ``size`` bytes written so far, ``tell``,
    and a ``seek`` refused by code (a writer that moved backwards would make the running digest, or
    the object being streamed, describe other bytes). ``_NO_SEEK`` says why, for the error."""

    _NO_SEEK = ""
    size = 0

    def writable(self):
        return True

    def tell(self):
        return self.size

    def seek(self, *_args):
        raise CkptDcpError("DCP_WRITE_NOT_SEQUENTIAL", "%s: a DCP writer tried to seek; %s"
                           % (self._subject, self._NO_SEEK))


def _yield_to_writes():
    """Runs first on each hashing thread: lowers its priority a little (nice + 5, Linux only: elsewhere
    ``setpriority`` takes a process id). The hash may finish any time before the file's fsync does;
    the writes and the kernel's writeback until then are what the save waits for."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + _HASH_NICE, 19))
    except OSError:
        pass  # only a little slower


class _PyBuffer(ctypes.Structure):
    """CPython's ``Py_buffer``, to learn where a buffer's bytes are."""

    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_GET_BUFFER = ctypes.pythonapi.PyObject_GetBuffer
_GET_BUFFER.argtypes = (ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int)
_RELEASE_BUFFER = ctypes.pythonapi.PyBuffer_Release
_RELEASE_BUFFER.argtypes = (ctypes.POINTER(_PyBuffer),)


def _address_of(view):
    """The address of a contiguous buffer's first byte (``torch.save`` hands its writer views of raw
    memory, which Python cannot tell apart otherwise)."""
    buffer = _PyBuffer()
    _GET_BUFFER(view, ctypes.byref(buffer), 0)  # PyBUF_SIMPLE
    try:
        return buffer.buf or 0
    finally:
        _RELEASE_BUFFER(ctypes.byref(buffer))


class _StoragePins:
    """The CPU tensor storages one save resolved for writing, kept alive until its files are closed,
    so that a stream may hash a write out of them after ``write`` has returned. ``pin`` returns the
    tensor DCP's loader would make of the one resolved (detached, compact), so the bytes written do
    not change; other tensors pass through unpinned. Looked up by address; resolved concurrently by
    DCP's writer threads, hence the lock."""

    def __init__(self):
        self._lock = threading.Lock()
        self._starts = []
        self._spans = {}

    def pin(self, tensor):
        if not tensor.is_cpu:
            return tensor  # DCP's loader stages device tensors to the CPU itself, possibly overlapped
        tensor = tensor.detach()
        storage = tensor.untyped_storage()
        if storage.size() != tensor.nbytes:
            tensor = tensor.clone()  # as DCP's loader would: a view is saved as a compact copy
            storage = tensor.untyped_storage()
        start = storage.data_ptr()
        with self._lock:
            if start not in self._spans:
                bisect.insort(self._starts, start)
            self._spans[start] = (start + storage.nbytes(), tensor)
        return tensor

    def holds(self, view):
        """Whether ``view``'s bytes lie in a pinned storage."""
        address = _address_of(view)
        with self._lock:
            at = bisect.bisect_right(self._starts, address) - 1
            return at >= 0 and address + len(view) <= self._spans[self._starts[at]][0]

    def clear(self):
        with self._lock:
            self._starts.clear()
            self._spans.clear()


class _PinningPlanner:
    """The save planner, with each tensor it resolves for writing pinned (see _StoragePins)."""

    def __init__(self, planner, pins):
        self._planner = planner
        self._pins = pins

    def resolve_data(self, write_item):
        data = self._planner.resolve_data(write_item)
        return self._pins.pin(data) if isinstance(data, torch.Tensor) else data

    def __getattr__(self, name):
        return getattr(self._planner, name)


class _HashingStream(_AppendOnlyStream):
    """A write-only, append-only file stream that hashes what it writes, in order, on a thread of
    its own that runs behind the writes instead of holding them up.

    A stock save writes a file into the page cache, then waits for its fsync with the CPU idle; the
    hash belongs in that wait. So a write out of a pinned tensor storage (``pins``: alive until the
    save's files are closed) is hashed later, in place; a small one is copied first (its memory may
    be reused once ``write`` returns); a large one from elsewhere is hashed beside its write before
    ``write`` returns. ``fileno`` flushes (DCP fsyncs that descriptor: nothing may wait in a buffer)
    and ``close`` waits for the hash."""

    _NO_SEEK = "the hashing writer only appends. Use the stock FileSystemWriter for this serialization format"

    def __init__(self, raw, path, pins):
        self._raw = raw
        self._subject = path
        self._pins = pins
        self._sha = hashlib.sha256()
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-dcp-sha256",
                                          initializer=_yield_to_writes)
        self._last = None  # the last hash submitted: the hasher runs them in order
        self.size = 0

    def _write_all(self, view):
        done = 0
        while done < len(view):
            written = self._raw.write(view[done:])
            done += len(view) - done if written is None else written

    def write(self, data):
        view = memoryview(data).cast("B")
        if len(view) < _COPY_MAX:
            self._last = self._hasher.submit(self._sha.update, bytes(view))
            self._write_all(view)
        elif self._pins.holds(view):
            self._last = self._hasher.submit(self._sha.update, view)
            self._write_all(view)
        else:
            # hashlib drops the GIL on large buffers, and so does the file write: both run at once.
            self._last = self._hasher.submit(self._sha.update, view)
            try:
                self._write_all(view)
            finally:
                self._last.result()
        self.size += len(view)
        return len(view)

    def flush(self):
        self._raw.flush()

    def fileno(self):
        self._raw.flush()
        return self._raw.fileno()

    def stop_hashing(self):
        """Waits for the hashes already submitted (a failed save too: their memory must not be
        released under them) and ends the hashing thread."""
        self._hasher.shutdown(wait=True)

    def close(self):
        try:
            if self._last is not None:
                self._last.result()
        finally:
            self.stop_hashing()
            self._raw.close()

    def hexdigest(self):
        return self._sha.hexdigest()


class _HashingFileSystem(FileSystem):
    """DCP's local file system, with every file opened for writing hashed on the way (and its
    records written without torch's CRC-32, see _install_zip_crc_switch). Digests are kept by file
    name (the writer threads finish files concurrently, hence the lock); a renamed file (the
    ``.metadata.tmp`` DCP moves into place) keeps its digest under its new name. ``pins``: the
    storages the current save keeps alive for the streams' hashing threads."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self.pins = _StoragePins()
        self.written = {}

    @contextmanager
    def create_stream(self, path, mode):
        if mode != "wb":
            with super().create_stream(path, mode) as stream:
                yield stream
            return
        with super().create_stream(path, mode) as raw, _skipping_zip_crc():
            stream = _HashingStream(raw, path, self.pins)
            try:
                yield stream
            finally:
                stream.stop_hashing()
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
        self.fs = self._new_fs()
        self.inventory = None

    def _new_fs(self):
        """The file system of one save: it records ``(size, sha256)`` of each file it writes in ``written``."""
        return _HashingFileSystem()

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        self.fs = self._new_fs()
        self.inventory = None

    def write_data(self, plan, planner):
        # FileSystemWriter writes (and closes) every file before it returns its (completed) future.
        pins = self.fs.pins
        results = super().write_data(plan, planner if pins is None else _PinningPlanner(planner, pins)).wait()
        if pins is not None:
            # Every file is closed, so hashed. After a failure the pins stay until the next reset:
            # another writer thread may still be hashing out of them.
            pins.clear()
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
        entry_path, expected = _recorded_digests(manifest_path, component)
        return cls(os.path.join(iter_dir, entry_path), expected, *args, **kwargs)


def _recorded_digests(manifest_path, component):
    """(the component's path, {file name: sha256}) of directory component ``component`` in a
    description or artifact manifest; refused when it is unreadable or a file has no digest."""
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
    return entry["path"], {f["path"]: f["sha256"] for f in files}


# --- Direct object-store primary: DCP bytes go to the rank's local `ckpt-trainer data` process,
# which uploads them through @ckpt/object-store (multipart, retries) and hashes them on the way.

_FRAME = struct.Struct(">I")
# Frames sent to the data process: at most its MAX_FRAME_BYTES (16 MiB).
_MAX_FRAME = 16 << 20
# What one ranged read asks for: a DCP read of many small items needs few round trips.
_RANGE_READ = 8 << 20


class DataProcess:
    """One rank's ``ckpt-trainer data`` process (every rank, on every host, runs its own): the
    DCP writer and reader of a direct object-store primary talk to it over an owner-only unix
    socket. It holds the store's credentials (``credentials`` file, else the environment's
    ``AWS_*``); no secret crosses the socket. It ends when this process closes its stdin, so a
    SIGKILLed rank leaves no data process behind::

        data = DataProcess.spawn(credentials=None)
        writer = DirectWriter(save.targets["model"], data)
    """

    def __init__(self, socket_path, process, directory):
        self.socket_path = socket_path
        self._process = process
        self._directory = directory

    @classmethod
    def spawn(cls, credentials=None, command=None, timeout=60.0):
        """Start ``$CKPT_TRAINER_BIN data --socket ...`` (default ``ckpt-trainer``) and wait for its socket."""
        directory = tempfile.mkdtemp(prefix="ckpt-data-")
        path = os.path.join(directory, "data.sock")
        if command is None:
            command = shlex.split(os.environ.get("CKPT_TRAINER_BIN", "ckpt-trainer"))
        argv = list(command) + ["data", "--socket", path] + ([] if credentials is None else ["--credentials", credentials])
        process = subprocess.Popen(argv, stdin=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                shutil.rmtree(directory, ignore_errors=True)
                raise CkptDcpError("DCP_DATA_PROCESS_FAILED", "%s did not start serving %s (exit %s); see its log on "
                                   "stderr" % (" ".join(argv[:-2]), path, process.returncode))
            time.sleep(0.02)
        return cls(path, process, directory)

    def connect(self):
        return _DataConnection(self.socket_path)

    def close(self):
        self._process.stdin.close()
        self._process.wait()
        shutil.rmtree(self._directory, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()
        return False


class _DataConnection:
    """One connection to the data process; requests on it run one after another."""

    def __init__(self, path):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._reader = self._sock.makefile("rb")

    def send_header(self, **request):
        self._sock.sendall(json.dumps(request, separators=(",", ":")).encode("utf-8") + b"\n")

    def send_frame(self, data):
        view = memoryview(data).cast("B")
        for at in range(0, len(view), _MAX_FRAME):
            piece = view[at:at + _MAX_FRAME]
            self._sock.sendall(_FRAME.pack(len(piece)))
            self._sock.sendall(piece)

    def end_body(self):
        self._sock.sendall(_FRAME.pack(0))

    def read_frames_into(self, target):
        """Every frame until the end frame, appended to ``target`` (a bytearray)."""
        while True:
            header = self._reader.read(4)
            if len(header) < 4:
                raise CkptDcpError("DCP_DATA_PROCESS_FAILED", "the data process closed the connection mid-answer")
            (length,) = _FRAME.unpack(header)
            if length == 0:
                return
            target += self._reader.read(length)

    def result(self, what):
        line = self._reader.readline()
        if not line:
            raise CkptDcpError("DCP_DATA_PROCESS_FAILED", "%s: the data process closed the connection (see its log)" % what)
        answer = json.loads(line)
        if not answer.get("ok"):
            error = answer.get("error") or {}
            raise CkptDcpError(error.get("code", "INTERNAL"), "%s: %s" % (what, error.get("message", "")))
        return answer["result"]

    def request(self, what, **request):
        self.send_header(**request)
        return self.result(what)

    def get(self, uri, start, end):
        self.send_header(op="get", uri=uri, start=start, end=end)
        data = bytearray()
        self.read_frames_into(data)
        self.result("get %s [%d, %d)" % (uri, start, end))
        return data

    def close(self):
        for closing in (self._reader, self._sock):
            try:
                closing.close()
            except OSError:
                pass


class _UploadStream(_AppendOnlyStream):
    """A write-only stream whose bytes go, frame by frame, to one object: the data process uploads
    them as they come (nothing is held whole on either side) and answers with the size and SHA-256
    of what it stored. An upload not finished (an exception in the writer) is never stored."""

    _NO_SEEK = "an object is written in one pass. Use the stock serialization format"

    def __init__(self, data, uri):
        self._uri = self._subject = uri
        self._conn = data.connect()
        self._conn.send_header(op="put", uri=uri)
        self.size = 0

    def write(self, data):
        view = memoryview(data).cast("B")
        self._conn.send_frame(view)
        self.size += len(view)
        return len(view)

    def flush(self):
        pass

    def close(self):
        # DCP closes the stream inside the `with`; the upload is finished (or abandoned) at its end.
        pass

    def finish(self):
        """Ends the body; the (size, sha256) the data process stored."""
        try:
            self._conn.end_body()
            stored = self._conn.result("put %s" % self._uri)
        finally:
            self._conn.close()
        if stored["size"] != self.size:
            raise CkptDcpError("DCP_DATA_PROCESS_FAILED", "put %s: %d bytes written, %d stored"
                               % (self._uri, self.size, stored["size"]))
        return stored["size"], stored["sha256"]

    def abandon(self):
        self._conn.close()


class _RangedObject(io.RawIOBase):
    """A seekable read-only view of one object: each read is a ranged GET through the data process."""

    def __init__(self, conn, uri, size):
        self._conn = conn
        self._uri = uri
        self._size = size
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer):
        end = min(self._pos + len(buffer), self._size)
        if end <= self._pos:
            return 0
        data = self._conn.get(self._uri, self._pos, end)
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)


def _name_of(path):
    return str(path).rstrip("/").rsplit("/", 1)[-1]


class _DirectFileSystem(FileSystemBase):
    """DCP's storage calls on store URIs, through the data process. A put is atomic (no partial
    object is ever visible), so DCP's ``.metadata.tmp`` is uploaded under its final name and the
    rename that follows only moves the digest record. Writes record ``(size, sha256)`` by file
    name in ``written``; reads of a file with a recorded digest first have the data process stream
    it once through SHA-256 (``DCP_DIGEST_MISMATCH`` names a damaged file before any of it is used)."""

    pins = None  # an upload stream sends each write before it returns: nothing to keep alive

    def __init__(self, data, expected=None):
        self._data = data
        self._expected = expected
        self._lock = threading.Lock()
        self._verified = set()
        self.written = {}

    def init_path(self, path):
        return str(path).rstrip("/")

    def concat_path(self, path, suffix):
        return "%s/%s" % (str(path).rstrip("/"), suffix)

    @contextmanager
    def create_stream(self, path, mode):
        uri = str(path)
        if mode == "wb":
            if uri.endswith(".metadata.tmp"):
                uri = uri[:-len(".tmp")]
            stream = _UploadStream(self._data, uri)
            try:
                with _skipping_zip_crc():
                    yield stream
            except BaseException:
                stream.abandon()
                raise
            record = stream.finish()
            with self._lock:
                self.written[_name_of(path)] = record
            return
        conn = self._data.connect()
        try:
            size = self._verify(conn, uri)
            yield io.BufferedReader(_RangedObject(conn, uri, size), buffer_size=_RANGE_READ)
        finally:
            conn.close()

    def _verify(self, conn, uri):
        """The object's size, after its digest is checked against the recorded one (once per file)."""
        name = _name_of(uri)
        with self._lock:
            verified = name in self._verified
        if self._expected is None or verified:
            return conn.request("head %s" % uri, op="head", uri=uri)["size"]
        expected = self._expected.get(name)
        if expected is None:
            raise CkptDcpError("DCP_DIGEST_MISSING", "%s: no recorded digest for this object; resume from a checkpoint "
                               "saved with DirectWriter" % uri)
        found = conn.request("digest %s" % uri, op="digest", uri=uri)
        if found["sha256"] != expected:
            raise CkptDcpError("DCP_DIGEST_MISMATCH", "%s: SHA-256 %s, but %s was recorded when it was uploaded; the "
                               "object changed since. Resume from another checkpoint" % (uri, found["sha256"], expected))
        with self._lock:
            self._verified.add(name)
        return found["size"]

    def rename(self, path, new_path):
        with self._lock:
            record = self.written.pop(_name_of(path), None)
            if record is not None:
                self.written[_name_of(new_path)] = record

    def mkdir(self, path):
        pass

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return "://" in str(checkpoint_id)

    def exists(self, path):
        # Only asked for `.metadata` before it is replaced: a put replaces it anyway.
        return False

    def rm_file(self, path):
        pass


class DirectWriter(HashingFileSystemWriter):
    """The DCP writer of a direct object-store primary: ``path`` is the save's store URI of a
    component (``save.targets["model"]``), ``data`` this rank's ``DataProcess``. Each file streams
    to the store as it is written (no local copy); ``inventory`` on the coordinator lists what the
    data process stored, as ``HashingFileSystemWriter``'s does, for ``commit``."""

    def __init__(self, path, data, *args, **kwargs):
        self._data = data
        kwargs.setdefault("sync_files", False)  # nothing local to fsync: a completed put is durable
        super().__init__(path, *args, **kwargs)
        self.path = self.fs.init_path(path)

    def _new_fs(self):
        return _DirectFileSystem(self._data)


class DirectReader(FileSystemReader):
    """The DCP reader of a direct object-store primary: ranged GETs in place (the tree is never
    downloaded), each object checked against ``expected`` ({file name: sha256}) before use."""

    def __init__(self, path, data, expected, *args, **kwargs):
        super().__init__(path, *args, **kwargs)
        self.fs = _DirectFileSystem(data, dict(expected))
        self.path = self.fs.init_path(path)

    @classmethod
    def from_resume(cls, point, component, data, *args, **kwargs):
        """The reader of ``component`` of a resume point on a direct primary, checked against the
        digests of the checkpoint's description (cached by the sidecar beside ``trainer.pt``)."""
        description = os.path.join(os.path.dirname(point.components["trainer"]), DESCRIPTION_FILES[0])
        _path, expected = _recorded_digests(description, component)
        return cls(point.components[component], data, expected, *args, **kwargs)
