"""Tests of ckpt_dcp.py with PyTorch 2 on 2 gloo ranks, through a live sidecar (run by dcp.test.ts).

Environment: PYTHONPATH holds the client's directory and this one; CKPT_TRAINER_BIN runs the built
sidecar; the interpreter is the PyTorch 2 one.
"""

import atexit
import collections
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zipfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

import ckpt_dcp
from ckpt_dcp import DESCRIPTION_FILES, CkptDcpError, HashingFileSystemReader, HashingFileSystemWriter, inventory_of, refusal_of
from torch.distributed.checkpoint.api import CheckpointException
from ckpt_trainer_client import CkptTrainerError, RankGroup, Sidecar, fsync_file

WORLD = 2


def full_state():
    """What the ranks save, as full tensors: a sharded weight, a replicated bias, a plain value."""
    return {"weight": torch.arange(64 * 32, dtype=torch.float32).reshape(64, 32) / 7,
            "bias": torch.linspace(-1, 1, 32), "step": 3}


def sharded_state(mesh):
    state = full_state()
    state["weight"] = distribute_tensor(state["weight"], mesh, [Shard(0)])
    return state


def rank_main(rank, root, out):
    dist.init_process_group("gloo", init_method="file://" + os.path.join(root, "pg"), rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    group = RankGroup.over_torch_distributed(rank, WORLD, Sidecar.spawn() if rank == 0 else None)
    group.open({"save_every": 1, "save_async": False, "checkpoint_format": "dcp"}, os.path.join(root, "out"),
               "proj", "grp", "run")
    save = group.begin_save(1)
    writers = {}
    for name in ("model", "optim"):
        writers[name] = HashingFileSystemWriter(save.targets[name])
        dcp.save(sharded_state(mesh), storage_writer=writers[name])
    if rank == 0:
        for name in ("trainer", "data"):
            torch.save({"name": name}, save.targets[name])
            fsync_file(save.targets[name])
    inventory = inventory_of(writers, save.dir)
    refusal = None
    try:
        group.commit(save, inventory=[{"path": "../escape", "size": 1, "sha256": "0" * 64}] if rank == 0 else None)
    except CkptTrainerError as error:
        refusal = error.code
    committed = group.commit(save, inventory=inventory)
    group.finalize()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"dir": save.dir, "inventory": inventory, "refusal": refusal, "committed": committed}, f)
    else:
        with open(out + ".1", "w") as f:
            json.dump({"inventory": inventory, "refusal": refusal}, f)
    dist.destroy_process_group()


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_model(reader):
    """Loads the model component into full tensors in this one process (DCP reshards the weight)."""
    state = {"weight": torch.zeros(64, 32), "bias": torch.zeros(32), "step": 0}
    dcp.load(state, storage_reader=reader)
    return state


_saved = None


def saved_checkpoint():
    """The 2-rank save every test reads, made once per process (the driver runs tests one by one,
    without class fixtures): its root, rank 0's result and rank 1's."""
    global _saved
    if _saved is None:
        tmp = tempfile.TemporaryDirectory(prefix="ckpt-dcp-")
        atexit.register(tmp.cleanup)
        out = os.path.join(tmp.name, "result.json")
        mp.start_processes(rank_main, args=(tmp.name, out), nprocs=WORLD, start_method="spawn")
        with open(out) as f:
            rank0 = json.load(f)
        with open(out + ".1") as f:
            rank1 = json.load(f)
        _saved = (tmp.name, rank0, rank1)
    return _saved


class HashingWriterTests(unittest.TestCase):
    def setUp(self):
        self.root, self.result, self.rank1 = saved_checkpoint()

    def test_the_inventory_lists_every_shard_and_metadata_with_the_files_sha256(self):
        save_dir = self.result["dir"]
        on_disk = sorted("%s/%s" % (name, f) for name in ("model", "optim")
                         for f in os.listdir(os.path.join(save_dir, name)))
        inventory = self.result["inventory"]
        self.assertEqual([e["path"] for e in inventory], on_disk)
        self.assertIn("model/.metadata", on_disk)
        self.assertIn("model/__1_0.distcp", on_disk)  # rank 1's shard reached rank 0 through DCP's gather
        for entry in inventory:
            path = os.path.join(save_dir, entry["path"])
            self.assertEqual((entry["size"], entry["sha256"]), (os.path.getsize(path), sha256_of(path)), entry["path"])

    def test_only_the_coordinator_has_the_inventory(self):
        self.assertIsNone(self.rank1["inventory"])

    def test_the_sidecar_commits_with_the_inventory_and_refuses_an_unsafe_path_first(self):
        self.assertEqual(self.result["refusal"], "INVENTORY_UNSAFE_PATH")
        self.assertEqual(self.rank1["refusal"], "INVENTORY_UNSAFE_PATH")
        self.assertEqual(self.result["committed"]["status"], "committed")

    def test_the_stock_reader_loads_what_the_writer_wrote(self):
        state = load_model(FileSystemReader(os.path.join(self.result["dir"], "model")))
        expected = full_state()
        self.assertTrue(torch.equal(state["weight"], expected["weight"]))
        self.assertTrue(torch.equal(state["bias"], expected["bias"]))
        self.assertEqual(state["step"], 3)

    def copy_of_model(self):
        copy = os.path.join(self.root, "copy-%s" % self.id().rsplit(".", 1)[-1])
        shutil.copytree(os.path.join(self.result["dir"], "model"), copy)
        expected = {e["path"][len("model/"):]: e["sha256"] for e in self.result["inventory"]
                    if e["path"].startswith("model/")}
        return copy, expected

    def test_the_hashing_reader_loads_intact_files(self):
        copy, expected = self.copy_of_model()
        state = load_model(HashingFileSystemReader(copy, expected))
        self.assertTrue(torch.equal(state["weight"], full_state()["weight"]))

    def test_the_hashing_reader_refuses_a_file_changed_by_one_byte_naming_it(self):
        copy, expected = self.copy_of_model()
        victim = os.path.join(copy, "__1_0.distcp")
        with open(victim, "r+b") as f:
            f.seek(os.path.getsize(victim) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 1]))
        with self.assertRaises(CheckpointException) as caught:
            load_model(HashingFileSystemReader(copy, expected))
        refusal = refusal_of(caught.exception)
        self.assertEqual(refusal.code, "DCP_DIGEST_MISMATCH")
        self.assertIn(victim, str(refusal))

    def test_the_hashing_reader_refuses_a_file_without_a_recorded_digest(self):
        copy, expected = self.copy_of_model()
        del expected["__0_0.distcp"]
        with self.assertRaises(CheckpointException) as caught:
            load_model(HashingFileSystemReader(copy, expected))
        refusal = refusal_of(caught.exception)
        self.assertEqual(refusal.code, "DCP_DIGEST_MISSING")
        self.assertIn("__0_0.distcp", str(refusal))

    def copy_with_manifest_digests(self, digests):
        """A copy of the checkpoint whose manifest records (or not, per ``digests``) the inventory's digests."""
        copy = os.path.join(self.root, "iter-%s" % self.id().rsplit(".", 1)[-1])
        shutil.copytree(self.result["dir"], copy)
        manifest_path = os.path.join(copy, DESCRIPTION_FILES[0])  # a full checkpoint's
        with open(manifest_path) as f:
            manifest = json.load(f)
        recorded = {e["path"]: e["sha256"] for e in self.result["inventory"]}
        for component in manifest["physical_components"]:
            for entry in component.get("files", ()):
                entry.pop("sha256", None)
                if digests:
                    entry["sha256"] = recorded["%s/%s" % (component["path"], entry["path"])]
        with open(manifest_path, "w") as f:
            json.dump(manifest, f)
        return copy

    def test_the_hashing_reader_takes_the_digests_from_the_checkpoints_manifest(self):
        copy = self.copy_with_manifest_digests(True)
        state = load_model(HashingFileSystemReader.from_manifest(copy, "model"))
        self.assertTrue(torch.equal(state["weight"], full_state()["weight"]))

    def test_a_manifest_without_digests_is_refused_naming_it(self):
        copy = self.copy_with_manifest_digests(False)
        with self.assertRaises(CkptDcpError) as caught:
            HashingFileSystemReader.from_manifest(copy, "model")
        self.assertEqual(caught.exception.code, "DCP_DIGEST_MISSING")
        self.assertIn(DESCRIPTION_FILES[0], str(caught.exception))


class WriterThreadsTests(unittest.TestCase):
    def test_several_writer_threads_and_a_file_per_item_hash_every_file(self):
        with tempfile.TemporaryDirectory(prefix="ckpt-dcp-threads-") as root:
            writer = HashingFileSystemWriter(root, thread_count=3, single_file_per_rank=False)
            state = {"t%d" % i: torch.full((1000 + i,), float(i)) for i in range(7)}
            state["step"] = 9
            dcp.save(state, storage_writer=writer)  # one process: it is its own coordinator
            self.assertEqual(sorted(e["path"] for e in writer.inventory), sorted(os.listdir(root)))
            self.assertEqual(len(writer.inventory), 9)  # 8 items, one file each, and .metadata
            for entry in writer.inventory:
                path = os.path.join(root, entry["path"])
                self.assertEqual((entry["size"], entry["sha256"]), (os.path.getsize(path), sha256_of(path)))


class DeferredHashTests(unittest.TestCase):
    """The hashing stream runs its hash behind the writes only where the bytes stay put."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="ckpt-dcp-defer-")
        self.pins = ckpt_dcp._StoragePins()
        self.path = os.path.join(self.dir.name, "f")
        self.stream = ckpt_dcp._HashingStream(open(self.path, "wb"), self.path, self.pins)
        # The hashing thread is held until release is set: what a write waits for is then visible.
        self.release = threading.Event()
        self.priority = []

        def hold():
            self.priority.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            self.release.wait(30)

        self.stream._last = self.stream._hasher.submit(hold)

    def tearDown(self):
        self.release.set()
        self.stream.close()
        self.pins.clear()
        self.dir.cleanup()

    def finish(self):
        self.release.set()
        self.stream.close()
        self.assertEqual(self.stream.hexdigest(), sha256_of(self.path))
        self.assertEqual(self.stream.size, os.path.getsize(self.path))

    def test_a_write_out_of_a_pinned_storage_returns_before_it_is_hashed(self):
        tensor = self.pins.pin(torch.arange(1 << 20, dtype=torch.float32))  # 4 MiB
        self.stream.write(memoryview(tensor.numpy()).cast("B"))
        self.assertFalse(self.stream._last.done())
        self.finish()

    def test_a_large_write_from_other_memory_is_hashed_before_write_returns(self):
        buffer = bytearray(os.urandom(2 << 20))
        done = []
        thread = threading.Thread(target=lambda: done.append(self.stream.write(buffer)))
        thread.start()
        thread.join(0.5)
        self.assertEqual(done, [])  # waiting for the held hash
        self.release.set()
        thread.join(30)
        self.assertEqual(done, [len(buffer)])
        buffer[:] = bytes(len(buffer))  # the caller reuses its buffer: the digest is of what was written
        self.finish()

    def test_a_small_write_is_copied_so_its_buffer_may_be_reused_at_once(self):
        buffer = bytearray(b"zip header " * 10)
        self.stream.write(buffer)
        self.assertFalse(self.stream._last.done())
        buffer[:] = bytes(len(buffer))
        self.finish()

    def test_a_pinned_storage_covers_only_its_own_bytes(self):
        tensor = self.pins.pin(torch.ones(1000))
        inside = memoryview(tensor.numpy()).cast("B")
        self.assertTrue(self.pins.holds(inside[100:200]))
        self.assertFalse(self.pins.holds(memoryview(bytearray(4000))))
        self.pins.clear()
        self.assertFalse(self.pins.holds(inside))

    def test_a_view_of_a_larger_storage_is_pinned_as_a_compact_copy_and_saved_right(self):
        base = torch.arange(10000.0)
        pinned = self.pins.pin(base[100:300])
        self.assertEqual(pinned.untyped_storage().nbytes(), pinned.nbytes)
        self.assertTrue(torch.equal(pinned, base[100:300]))
        with tempfile.TemporaryDirectory(prefix="ckpt-dcp-view-") as root:
            writer = HashingFileSystemWriter(root)
            dcp.save({"v": base[100:300], "w": base.reshape(100, 100).t()}, storage_writer=writer)
            self.assertFalse(writer.fs.pins.holds(memoryview(pinned.numpy()).cast("B")))  # released after the save
            for entry in writer.inventory:
                self.assertEqual(entry["sha256"], sha256_of(os.path.join(root, entry["path"])))
            state = {"v": torch.zeros(200), "w": torch.zeros(100, 100)}
            dcp.load(state, storage_reader=FileSystemReader(root))
            self.assertTrue(torch.equal(state["v"], base[100:300]))
            self.assertTrue(torch.equal(state["w"], base.reshape(100, 100).t()))

    def test_a_failed_write_still_waits_for_the_hashes_before_the_stream_is_left(self):
        fs = ckpt_dcp._HashingFileSystem()
        tensor = fs.pins.pin(torch.ones(1 << 20))
        hashed = []
        with self.assertRaises(OSError):
            with fs.create_stream(os.path.join(self.dir.name, "g"), "wb") as stream:
                stream._hasher.submit(lambda: (time.sleep(0.3), hashed.append(True)))
                stream.write(memoryview(tensor.numpy()).cast("B"))
                raise OSError("disk full")
        self.assertEqual(hashed, [True])
        self.assertTrue(stream._hasher._shutdown)

    def test_a_dcp_save_hashes_a_tensor_s_bytes_in_place_behind_the_write(self):
        seen = []
        holds = ckpt_dcp._StoragePins.holds

        def recording(pins, view):
            seen.append((len(view), holds(pins, view)))
            return seen[-1][1]

        ckpt_dcp._StoragePins.holds = recording
        try:
            with tempfile.TemporaryDirectory(prefix="ckpt-dcp-inplace-") as root:
                writer = HashingFileSystemWriter(root)
                dcp.save({"w": torch.rand(1024, 1024)}, storage_writer=writer)
                for entry in writer.inventory:
                    self.assertEqual(entry["sha256"], sha256_of(os.path.join(root, entry["path"])))
        finally:
            ckpt_dcp._StoragePins.holds = holds
        # torch.save hands the 4 MiB storage to the stream in place: if it copied it first, every
        # save would hash beside its writes again.
        self.assertEqual(seen, [(4 << 20, True)])

    def test_the_hashing_thread_runs_below_its_writer(self):
        self.release.set()
        self.stream._last.result()
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        self.assertEqual(self.priority, [min(mine + 5, 19)])


def zip_crcs(data):
    """The CRC-32 each record of a torch.save zip (bytes) declares, and whether they all hold."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [info.CRC for info in z.infolist()], z.testzip() is None


def saved_bytes(tensor):
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    return buffer.getvalue()


class ZipCrcTests(unittest.TestCase):
    def test_the_writer_s_records_carry_no_crc_and_still_load(self):
        with tempfile.TemporaryDirectory(prefix="ckpt-dcp-crc-") as root:
            # A file per item: each .distcp is then one torch.save zip.
            writer = HashingFileSystemWriter(root, thread_count=2, single_file_per_rank=False)
            dcp.save({"a": torch.arange(1000.0), "b": torch.ones(10)}, storage_writer=writer)
            items = sorted(f for f in os.listdir(root) if f.endswith(".distcp"))
            self.assertEqual(len(items), 2)
            for name in items:
                with open(os.path.join(root, name), "rb") as f:
                    crcs, intact = zip_crcs(f.read())
                self.assertEqual(set(crcs), {0}, name)
                self.assertFalse(intact, name)
            state = {"a": torch.zeros(1000), "b": torch.zeros(10)}
            dcp.load(state, storage_reader=FileSystemReader(root))
            self.assertTrue(torch.equal(state["a"], torch.arange(1000.0)))
            self.assertTrue(torch.equal(state["b"], torch.ones(10)))
        # After the save, this thread's own torch.save has its CRCs again.
        crcs, intact = zip_crcs(saved_bytes(torch.arange(1000.0)))
        self.assertTrue(intact and all(crcs))

    def test_another_thread_s_torch_save_keeps_its_crc_while_a_writer_thread_skips_it(self):
        inside = threading.Event()
        done = threading.Event()
        seen = {}

        def writer_thread():
            with ckpt_dcp._skipping_zip_crc():
                seen["writer"] = zip_crcs(saved_bytes(torch.ones(100)))
                inside.set()
                done.wait(30)

        thread = threading.Thread(target=writer_thread)
        thread.start()
        try:
            self.assertTrue(inside.wait(30))
            seen["other"] = zip_crcs(saved_bytes(torch.ones(100)))
        finally:
            done.set()
            thread.join()
        self.assertEqual(set(seen["writer"][0]), {0})
        self.assertTrue(seen["other"][1] and all(seen["other"][0]))


def async_rank_main(rank, root, out):
    """Each rank saves through ``dcp.async_save`` (DCP's writer running in a background thread,
    on the gloo process group) and waits for its future; rank 0 writes the writer's inventory."""
    dist.init_process_group("gloo", init_method="file://" + os.path.join(root, "pg"), rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    writer = HashingFileSystemWriter(os.path.join(root, "model"))
    dcp.async_save(sharded_state(mesh), storage_writer=writer, process_group=dist.group.WORLD).result()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(writer.inventory, f)
    elif writer.inventory is not None:
        raise AssertionError("rank 1 holds an inventory")
    dist.destroy_process_group()


class AsyncSaveTests(unittest.TestCase):
    def test_async_save_hashes_every_file_and_the_stock_reader_loads_it(self):
        with tempfile.TemporaryDirectory(prefix="ckpt-dcp-async-") as root:
            out = os.path.join(root, "inventory.json")
            mp.start_processes(async_rank_main, args=(root, out), nprocs=WORLD, start_method="spawn")
            with open(out) as f:
                inventory = json.load(f)
            model = os.path.join(root, "model")
            self.assertEqual([e["path"] for e in inventory], sorted(os.listdir(model)))
            self.assertIn("__1_0.distcp", [e["path"] for e in inventory])
            for entry in inventory:
                path = os.path.join(model, entry["path"])
                self.assertEqual((entry["size"], entry["sha256"]), (os.path.getsize(path), sha256_of(path)))
            state = load_model(FileSystemReader(model))
            self.assertTrue(torch.equal(state["weight"], full_state()["weight"]))


EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "train_fsdp2.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid):
    """Every living process below ``pid`` (Linux /proc): the sidecar, the data processes."""
    found = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return found
    for task in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for child in children:
            found.append(child)
            found.extend(_descendants(child))
    return found


def _running(pid):
    """False once a process is gone or a zombie (it no longer writes)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


class ExampleRun:
    """Both ranks of examples/train_fsdp2.py, started as torchrun starts them. Rank 0's log lines
    are kept with the instant each arrived, so a driver can act on them (``wait_for``, ``kill``)."""

    def __init__(self, root, *extra):
        self.result = os.path.join(root, "result.json")
        port = free_port()
        self.ranks = [subprocess.Popen([sys.executable, EXAMPLE, "--output-root", os.path.join(root, "out"),
                                        "--steps", "6", "--save-every", "2", "--result", self.result, *extra],
                                       env=dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                                MASTER_PORT=str(port)),
                                       stderr=subprocess.PIPE, text=True)
                      for rank in range(2)]
        self.lines = []
        self.log = []
        self._arrived = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(rank,), daemon=True) for rank in range(2)]
        for reader in self._readers:
            reader.start()

    def _read(self, rank):
        for line in self.ranks[rank].stderr:
            sys.stderr.write(line)  # passed on, as an unpiped rank's would be
            with self._arrived:
                self.log.append(line)
                if rank == 0:
                    self.lines.append((time.monotonic(), line.rstrip("\n")))
                self._arrived.notify_all()
        with self._arrived:
            self._arrived.notify_all()

    def wait_for(self, marker, timeout=600):
        """The instant rank 0 first logged a line containing ``marker``; None when it exited without."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                for at, line in self.lines:
                    if marker in line:
                        return at
                if self.ranks[0].poll() is not None and not self._readers[0].is_alive():
                    return None
                if time.monotonic() > deadline:
                    raise AssertionError("rank 0 did not log %r in %d s:\n%s" % (marker, timeout, self.tail()))
                self._arrived.wait(0.5)

    def lines_before(self, instant):
        with self._arrived:
            return [line for at, line in self.lines if at <= instant]

    def kill(self):
        """SIGKILLs both ranks (when still running) and waits until they and every process they
        started are gone; the instant of the kill, or None when both had already exited."""
        children = [c for p in self.ranks for c in _descendants(p.pid)]
        if all(p.poll() is not None for p in self.ranks):
            return None
        instant = time.monotonic()
        for p in self.ranks:
            p.kill()
        self.wait()
        deadline = time.monotonic() + 60
        while any(_running(c) for c in children):
            if time.monotonic() > deadline:
                raise AssertionError("processes %s outlived the killed ranks" % [c for c in children if _running(c)])
            time.sleep(0.02)
        return instant

    def wait(self):
        """Both exit codes and rank 0's result (None when it wrote none)."""
        codes = [p.wait(timeout=600) for p in self.ranks]
        for reader in self._readers:
            reader.join()
        for p in self.ranks:
            p.stderr.close()
        outcome = None
        if os.path.exists(self.result):
            with open(self.result) as f:
                outcome = json.load(f)
            os.unlink(self.result)
        return codes, outcome

    def tail(self, lines=40):
        with self._arrived:
            return "".join(self.log[-lines:])


def run_example(root, *extra):
    """Both ranks of the example run to their end; their exit codes and rank 0's result."""
    return ExampleRun(root, *extra).wait()


# The crash loop's replay seed (CKPT_CRASH_SEED), as the other crash suites take it.
CRASH_SEED = int(os.environ.get("CKPT_CRASH_SEED") or random.randrange(1 << 32))
CRASH_STEPS = 4  # saves at steps 2 and 4
RESUMED = re.compile(r"resumed from .* \(step (\d+)\)")
COMMITTED = re.compile(r"committed \w+ at step (\d+)")
SAVING = re.compile(r"saving step (\d+): ")


def crash_kills(default):
    """SIGKILLs of a crash loop: ``$CKPT_CRASH_KILLS``, else ``default``."""
    return int(os.environ.get("CKPT_CRASH_KILLS") or default)


def steps_logged(lines, pattern):
    return [int(m.group(1)) for m in map(pattern.search, lines) if m is not None]


def resumed_step(lines):
    """The step a run resumed at, from rank 0's log (0: it started afresh)."""
    return max(steps_logged(lines, RESUMED), default=0)


def saving_step(lines):
    """The step of the last save that began (the resumed step when none did)."""
    return max(steps_logged(lines, SAVING), default=resumed_step(lines))


def phase_of(lines):
    """Where rank 0 was when it died: inside a save (the model's or the optimizer's shards, each
    with its ``.metadata``, or the commit of the description and manifest), or after a commit."""
    for line in reversed(lines):
        if SAVING.search(line):
            return line.rsplit(": ", 1)[-1]
        if COMMITTED.search(line):
            return "after commit"
    return "before a save"


def save_seconds(timed_lines):
    """The longest save of a run's timed rank 0 log, from its first marker to its commit."""
    began, committed = {}, {}
    for at, line in timed_lines:
        for step in steps_logged([line], SAVING):
            began.setdefault(step, at)
        for step in steps_logged([line], COMMITTED):
            committed[step] = at
    return max(committed[step] - began[step] for step in committed)


def crash_loop(test, root, args_of, kills, suite):
    """SIGKILLs both ranks of the example ``kills`` times, each at a seeded instant after a save
    began (up to half a save past its end, so some land between saves), and reruns the unchanged
    command (``args_of(project)``) after each. Checked after every kill: the next run resumes from
    the last checkpoint rank 0 saw committed, or from the save it was in (committed by the sidecar
    before rank 0 heard), through the digest-checking reader, which refuses any file a kill tore. A
    run that ends before its kill completes a chain of runs (the next starts a fresh project), and
    it, like the last resume, must match an uninterrupted run bit for bit. Prints a ``crash suite
    done`` report (tools/bench/crash-soak.bench.mjs) and returns it."""
    rng = random.Random(CRASH_SEED)
    report = "%s, seed %d (replay: CKPT_CRASH_SEED=%d)" % (suite, CRASH_SEED, CRASH_SEED)
    steps = ("--steps", str(CRASH_STEPS))
    straight_run = ExampleRun(os.path.join(root, "straight"), *args_of("straight"), *steps)
    codes, straight = straight_run.wait()
    test.assertEqual(codes, [0, 0], "%s\n%s" % (report, straight_run.tail()))
    save_s = save_seconds(straight_run.lines)
    killed = os.path.join(root, "killed")
    chain, possible, cycles, checks, states = 0, {0}, [], 0, collections.Counter()
    while len(cycles) < kills:
        started = time.monotonic()
        run = ExampleRun(killed, *args_of("killed-%d" % chain), *steps)
        if run.wait_for("saving step") is not None:
            time.sleep(rng.uniform(0, 1.5 * save_s))
        killed_at = run.kill()
        lines = [line for _at, line in run.lines]  # all rank 0 logged before it died
        test.assertIn(resumed_step(lines), possible, "%s: resumed at the wrong checkpoint\n%s" % (report, run.tail()))
        checks += 1
        if killed_at is None:  # the run ended before the kill: its chain is done
            codes, outcome = run.wait()
            test.assertEqual(codes, [0, 0], "%s\n%s" % (report, run.tail()))
            test.assertEqual(outcome["digest"], straight["digest"], report)
            chain, possible = chain + 1, {0}
            continue
        cycles.append(time.monotonic() - started)
        states[phase_of(lines)] += 1
        possible = {max([resumed_step(lines)] + steps_logged(lines, COMMITTED)), saving_step(lines)}
    final = ExampleRun(killed, *args_of("killed-%d" % chain), *steps)
    codes, resumed = final.wait()
    test.assertEqual(codes, [0, 0], "%s\n%s" % (report, final.tail()))
    test.assertIn(resumed_step([line for _at, line in final.lines]), possible, report)
    test.assertEqual(resumed["digest"], straight["digest"], report)
    outcome = {"suite": suite, "seed": CRASH_SEED, "kills": len(cycles), "checks": checks + 1, "rounds": chain + 1,
               "windowMs": round(save_s * 1000), "states": dict(states),
               "killCycleS": {"mean": round(sum(cycles) / len(cycles), 2), "min": round(min(cycles), 2),
                              "max": round(max(cycles), 2)}}
    print("crash suite done: %s" % json.dumps(outcome), file=sys.stderr, flush=True)
    # The loop proves little unless kills landed inside saves.
    test.assertGreater(sum(n for state, n in states.items() if state != "after commit"), 0, report)
    return outcome


class Fsdp2ExampleTests(unittest.TestCase):
    def test_the_fsdp2_example_resumes_bit_exactly_after_sigkill(self):
        with tempfile.TemporaryDirectory(prefix="ckpt-fsdp2-") as root:
            codes, straight = run_example(os.path.join(root, "straight"))
            self.assertEqual(codes, [0, 0])
            self.assertEqual(straight["step"], 6)
            killed_root = os.path.join(root, "killed")
            codes, _ = run_example(killed_root, "--kill-at-step", "5")
            self.assertEqual(codes, [-signal.SIGKILL, -signal.SIGKILL])
            codes, resumed = run_example(killed_root)
            self.assertEqual(codes, [0, 0])
            self.assertTrue(resumed["resumed_from"].endswith("iter_000000004"), resumed["resumed_from"])
            self.assertEqual(resumed["digest"], straight["digest"])

    def test_sigkilled_inside_saves_the_unchanged_command_resumes_bit_exactly(self):
        """CKPT_CRASH_KILLS (default 4) SIGKILLs of both ranks inside local DCP saves (crash_loop)."""
        with tempfile.TemporaryDirectory(prefix="ckpt-fsdp2-crash-") as root:
            crash_loop(self, root, lambda project: ("--project", project), crash_kills(4), "fsdp2-dcp")


if __name__ == "__main__":
    unittest.main()
