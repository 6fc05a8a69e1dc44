"""Drive the ckpt-trainer sidecar from a Python training loop (standard library only).

The sidecar owns the checkpoint layout, save plans, commits, the latest pointer, retention,
archive upload and resume resolution. The trainer owns its state: it writes each component
file (or each rank's shard files) to the paths the sidecar hands it, then asks for a commit.

Single process::

    from ckpt_trainer_client import Sidecar

    with Sidecar.spawn() as ckpt:               # runs `ckpt-trainer serve` ($CKPT_TRAINER_BIN)
        ckpt.open(config={"save_every": 50}, output_root=root, project="p", group="g", name="run")
        point = ckpt.resume()                   # point.kind: "fresh" or "checkpoint"
        if point.kind == "checkpoint":
            load(point.components)              # {"model": ".../model.pt", "optim": ..., ...}
        for step in range(start, max_steps):
            train_one_step()
            stop = ckpt.should_stop()           # sentinel file, SIGUSR1, SIGTERM
            save = ckpt.begin_save(step + 1, final=step + 1 == max_steps, emergency=stop.stop)
            if save is not None:
                for name, path in save.targets.items():
                    write(name, path)           # e.g. torch.save(...); fsync_file(path)
                ckpt.commit(save)
            if stop.stop:
                break
        ckpt.finalize()

Several ranks (torchrun, torch.distributed): only rank 0 runs a sidecar. Wrap it in
``RankGroup`` with the trainer's own collectives; every rank then calls the same methods in the
same order, receives the same answers, writes its own shards, and the commit waits on the
trainer's barrier. See ``RankGroup`` and docs/trainer-binding.md.

Protocol: one JSON object per line on the sidecar's stdin/stdout (or a unix socket), one
response per request, versioned by ``hello``. The reference is docs/trainer-binding.md.
"""

import dataclasses
import itertools
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import threading
import time

__all__ = [
    "PROTOCOL_VERSIONS",
    "Attempt",
    "CkptTrainerError",
    "RankGroup",
    "ResumePoint",
    "SavePlan",
    "Sidecar",
    "StopDecision",
    "fsync_file",
    "fsync_tree",
]

PROTOCOL_VERSIONS = (1,)
CLIENT_NAME = "ckpt_trainer_client.py/1"
# Seconds a request may wait for its answer. Generous: a synchronous commit fsyncs and describes
# the whole checkpoint, and finalize joins every background write and upload. A sidecar that died
# or hangs then yields SIDECAR_TIMEOUT instead of a trainer that waits forever.
DEFAULT_REQUEST_TIMEOUT = 3600.0
TIMEOUT_ENV = "CKPT_TRAINER_REQUEST_TIMEOUT"


def _timeout_from_env():
    """``$CKPT_TRAINER_REQUEST_TIMEOUT`` in seconds (``0`` or ``none``: wait forever), else the default."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip().lower()
    if raw == "":
        return DEFAULT_REQUEST_TIMEOUT
    if raw in ("0", "none"):
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise CkptTrainerError("CLIENT_BAD_ARGUMENT", "%s=%r is not a number of seconds > 0 (or 0/none for no limit)"
                               % (TIMEOUT_ENV, raw), kind="input")
    return value


class CkptTrainerError(Exception):
    """A refusal or failure reported by the sidecar (or the sidecar going away).

    ``code`` is stable (e.g. ``SAVE_UNKNOWN``, a manager code, or ``SIDECAR_GONE``); ``kind`` is
    ``input``, ``refused``, ``failed`` or ``transient``; ``source`` is ``protocol``, ``manager``
    or ``client``.
    """

    def __init__(self, code, message, kind="failed", source="client"):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.kind = kind
        self.source = source
        self.detail = message

    def to_wire(self):
        return {"code": self.code, "kind": self.kind, "message": self.detail, "source": self.source}

    @classmethod
    def from_wire(cls, error):
        return cls(error.get("code", "INTERNAL"), error.get("message", ""), error.get("kind", "failed"),
                   error.get("source", "protocol"))


@dataclasses.dataclass(frozen=True)
class Attempt:
    """The run attempt the sidecar opened: where checkpoints go and its RUN_TS."""

    attempt_dir: str
    run_ts: str
    checkpoints_dir: str
    format: str
    warnings: tuple

    @classmethod
    def from_wire(cls, r):
        return cls(r["attempt_dir"], r["run_ts"], r["checkpoints_dir"], r["format"], tuple(r.get("warnings", ())))


def _components(wire):
    """Wire components -> ({name: path}, frozenset of the directory components' names)."""
    wire = wire or ()
    return {c["name"]: c["path"] for c in wire}, frozenset(c["name"] for c in wire if c["kind"] == "directory")


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """What to start from. ``kind`` is ``fresh`` or ``checkpoint``; ``components`` maps each
    physical component name (``model``, ``optim``, ``trainer``, ``data``, ...) to its path, and
    ``directories`` names those that are directories of per-rank shards (``dcp``)."""

    kind: str
    reason: str
    iter_dir: str = None
    iteration: int = None
    components: dict = dataclasses.field(default_factory=dict)
    directories: frozenset = frozenset()
    manifest_sha256: str = None
    validation: str = None

    @classmethod
    def from_wire(cls, r):
        components, directories = _components(r.get("components"))
        return cls(r["kind"], r.get("reason", ""), r.get("iter_dir"), r.get("iteration"), components, directories,
                   r.get("manifest_sha256"), r.get("validation"))


@dataclasses.dataclass(frozen=True)
class SavePlan:
    """An open save: write every entry of ``targets`` (physical component name -> path), then
    commit. Names in ``directories`` are directory components (the ``dcp`` format): each rank
    writes its own shard files inside them; the others are single files rank 0 writes. When
    ``already_committed`` is true the iteration is already durable (a retried direct-primary save):
    write nothing and commit, which only confirms the pointer."""

    id: str
    step: int
    kind: str
    dir: str
    targets: dict
    directories: frozenset
    reasons: tuple = ()
    validation: str = "none"
    already_committed: bool = False

    @classmethod
    def from_wire(cls, r):
        targets, directories = _components(r["components"])
        return cls(r["id"], r["step"], r["kind"], r["dir"], targets, directories, tuple(r.get("reasons", ())),
                   r.get("validation", "none"), bool(r.get("already_committed")))


@dataclasses.dataclass(frozen=True)
class StopDecision:
    """Whether the loop must stop at this step boundary, and why (``None`` when it need not)."""

    stop: bool
    reason: str = None


def fsync_file(path):
    """Flush one written file to stable storage. On a shared file system only the writing host
    can do this, so every rank fsyncs its own shards before the barrier that precedes commit."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path):
    """fsync a file, or every file under a directory plus the directories themselves."""
    if not os.path.isdir(path):
        fsync_file(path)
        return
    for root, _dirs, files in os.walk(path):
        for name in files:
            fsync_file(os.path.join(root, name))
        fsync_file(root)


class _SignalFlags:
    """Flag-only handlers for SIGUSR1 and SIGTERM: a signal is remembered and reported at the next
    ``should_stop``; it never interrupts a step or a write."""

    def __init__(self):
        self.seen = []

    def install(self):
        for signum in (signal.SIGUSR1, signal.SIGTERM):
            signal.signal(signum, self._note)

    def _note(self, signum, _frame):
        name = signal.Signals(signum).name
        if name not in self.seen:
            self.seen.append(name)


class _StreamChannel:
    """One request line out, one response line in, over a pair of file descriptors, each answer
    awaited with a deadline (select on the raw descriptor: nothing sits in a hidden buffer)."""

    def __init__(self, read_fd, writer, closer):
        self._read_fd = read_fd
        self._writer = writer
        self._closer = closer
        self._pending = b""
        self._broken = None

    def exchange(self, line, what, timeout):
        if self._broken is not None:
            raise CkptTrainerError("SIDECAR_GONE", "%s: the connection is unusable since %s" % (what, self._broken))
        try:
            self._writer.write(line)
            self._writer.flush()
            return self._read_line(what, timeout)
        except (BrokenPipeError, ConnectionError, OSError, ValueError) as error:
            raise CkptTrainerError("SIDECAR_GONE", "%s: the sidecar is not reachable: %s" % (what, error)) from error

    def _read_line(self, what, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                # A late answer would be read as the next request's: the connection is spent.
                self._broken = "%s timed out" % what
                raise CkptTrainerError(
                    "SIDECAR_TIMEOUT",
                    "%s: no answer from the sidecar within %g s (it died or hangs; see its log on stderr). "
                    "Raise the limit with Sidecar(timeout=...) or $%s if the operation is legitimately slow."
                    % (what, timeout, TIMEOUT_ENV))
            ready, _, _ = select.select([self._read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._read_fd, 65536)
            if not chunk:
                self._broken = "the sidecar closed the connection"
                raise CkptTrainerError("SIDECAR_GONE", "%s: the sidecar closed the connection (see its log on stderr)" % what)
            self._pending += chunk
        answer, _, self._pending = self._pending.partition(b"\n")
        return answer + b"\n"

    def close(self):
        self._closer()


class Sidecar:
    """A connection to one ckpt-trainer sidecar. Use ``Sidecar.spawn`` or ``Sidecar.connect``."""

    def __init__(self, channel, process=None, watch_signals=True, timeout=None):
        self._channel = channel
        self._process = process
        # Seconds each request may wait for its answer; None here means "from the environment".
        self.timeout = _timeout_from_env() if timeout is None else timeout
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._flags = _SignalFlags()
        if watch_signals and threading.current_thread() is threading.main_thread():
            self._flags.install()
        self.hello = self.request("hello", protocol=list(PROTOCOL_VERSIONS), client=CLIENT_NAME)
        self.protocol = self.hello["protocol"]

    @classmethod
    def spawn(cls, command=None, env=None, watch_signals=True, timeout=None):
        """Start ``ckpt-trainer serve`` as a child speaking on its stdin/stdout; its log goes to
        this process's stderr. ``command`` defaults to ``$CKPT_TRAINER_BIN`` (split like a shell
        word list) followed by ``serve``, else ``ckpt-trainer serve``. ``timeout`` is the seconds
        each request may wait for its answer (default ``$CKPT_TRAINER_REQUEST_TIMEOUT``, else
        ``DEFAULT_REQUEST_TIMEOUT``); past it the request raises ``SIDECAR_TIMEOUT``."""
        if command is None:
            command = shlex.split(os.environ.get("CKPT_TRAINER_BIN", "ckpt-trainer")) + ["serve"]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

        def close():
            for stream in (process.stdin, process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            process.wait()

        try:
            return cls(_StreamChannel(process.stdout.fileno(), process.stdin, close), process, watch_signals, timeout)
        except BaseException:
            process.kill()  # a sidecar that never said hello is not left behind
            close()
            raise

    @classmethod
    def connect(cls, socket_path, watch_signals=True, timeout=None):
        """Connect to ``ckpt-trainer serve --socket PATH`` started by the launcher (``timeout`` as in ``spawn``)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
        writer = sock.makefile("wb")

        def close():
            for stream in (writer, sock):
                try:
                    stream.close()
                except OSError:
                    pass

        return cls(_StreamChannel(sock.fileno(), writer, close), None, watch_signals, timeout)

    @property
    def pid(self):
        """The sidecar's process id when this client spawned it, else None."""
        return None if self._process is None else self._process.pid

    def request(self, op, timeout=None, **args):
        """Send one request and return its result; raises CkptTrainerError on a refusal, and
        SIDECAR_TIMEOUT when no answer comes within ``timeout`` seconds (default ``self.timeout``)."""
        with self._lock:
            request_id = next(self._ids)
            line = json.dumps({"id": request_id, "op": op, "args": args}, separators=(",", ":")) + "\n"
            what = "request %s (id %d)" % (op, request_id)
            limit = self.timeout if timeout is None else timeout
            answer = json.loads(self._channel.exchange(line.encode("utf-8"), what, limit))
        # A refusal with no id answers a line the sidecar could not read (or a busy socket).
        if not answer.get("ok") and answer.get("id") in (None, request_id):
            raise CkptTrainerError.from_wire(answer.get("error") or {})
        if answer.get("id") != request_id:
            raise CkptTrainerError("PROTOCOL_MISMATCH", "response id %r for request %r (%s)"
                                   % (answer.get("id"), request_id, op))
        return answer.get("result")

    def open(self, config, output_root, project, group, name, run_ts=None, rank=0, world_size=1,
             credentials=None):
        """Open the run attempt with the checkpoint config (the knobs of docs/trainer-binding.md)."""
        args = {"config": config, "output_root": output_root, "project": project, "group": group,
                "name": name, "rank": rank, "world_size": world_size}
        if run_ts is not None:
            args["run_ts"] = run_ts
        if credentials is not None:
            args["credentials"] = credentials
        return Attempt.from_wire(self.request("open", **args))

    def resume(self):
        return ResumePoint.from_wire(self.request("resume"))

    def begin_save(self, step, final=False, validation=False, emergency=False, cadence=None):
        """Ask what to save at ``step`` (the step just completed); None when nothing is due.

        ``save_every`` decides the cadence unless ``cadence`` is given (a loop whose cadence counter
        is not the step, e.g. collected batches)."""
        args = {"step": step, "final": final, "validation": validation, "emergency": emergency}
        if cadence is not None:
            args["cadence"] = cadence
        result = self.request("begin_save", **args)
        save = result.get("save")
        return None if save is None else SavePlan.from_wire(save)

    def commit(self, save, inventory=None):
        """Commit a save whose targets are all written and fsynced.

        ``inventory``: the files the trainer hashed while writing them, ``[{"path", "size",
        "sha256"}]`` with paths relative to ``save.dir`` (``ckpt_dcp.inventory_of``); the sidecar
        records these digests instead of reading the files again."""
        if inventory is None:
            return self.request("commit", save_id=save.id)
        return self.request("commit", save_id=save.id, inventory=list(inventory))

    def complete_validation(self, iteration):
        """Publish a full checkpoint saved with validation pending, after its validation passed:
        evaluation-pending -> publication-pending -> published (strict archive upload when
        configured). For a checkpoint resumed as publication-pending it only retries publishing."""
        return self.request("complete_validation", iteration=iteration)

    def should_stop(self):
        """Whether to stop at this step boundary: the sidecar's watch (sentinel file, its own
        signals) plus SIGUSR1/SIGTERM this process caught."""
        result = self.request("should_stop", signals=list(self._flags.seen))
        return StopDecision(bool(result["stop"]), result.get("reason"))

    def finalize(self):
        """Join every in-flight write and end the session; the sidecar exits afterwards."""
        result = self.request("finalize")
        self.close()
        return result

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()
        return False


class RankGroup:
    """The same calls as ``Sidecar`` on every rank of a job; only rank 0 holds a sidecar.

    ``broadcast(obj)`` returns rank 0's ``obj`` on every rank; ``barrier()`` waits for every
    rank; ``any_true(flag)`` is true on every rank when any rank passed true (an all-reduce MAX).
    With torch.distributed these are ``dist.broadcast_object_list``, ``dist.barrier`` and an
    ``all_reduce`` with ``ReduceOp.MAX``, which ``over_torch_distributed`` wires up::

        group = RankGroup.over_torch_distributed(rank, world, Sidecar.spawn() if rank == 0 else None)

    Every method is a collective: call it on every rank in the same order. Errors of rank 0's
    sidecar are raised on every rank.

    Saving: ``begin_save`` gives every rank the same ``SavePlan``; each rank writes its own
    shard files into the directory targets (rank 0 also writes the file targets it owns, such
    as ``trainer`` and ``data``), fsyncs them (``fsync_tree``), then calls ``commit``: it holds
    the barrier first, so rank 0 commits only after every rank's shards landed.

    Stopping: ``should_stop`` ORs rank 0's sidecar decision with every rank's caught signals, so
    all ranks leave the loop at the same step and take the same emergency save.
    """

    def __init__(self, rank, world_size, sidecar, broadcast, barrier, any_true):
        if (rank == 0) != (sidecar is not None):
            raise ValueError("rank 0, and only rank 0, holds the sidecar")
        self.rank = rank
        self.world_size = world_size
        self._sidecar = sidecar
        self._broadcast = broadcast
        self._barrier = barrier
        self._any_true = any_true
        self._flags = _SignalFlags()
        if sidecar is None and threading.current_thread() is threading.main_thread():
            self._flags.install()

    @classmethod
    def over_torch_distributed(cls, rank, world_size, sidecar):
        """A group whose collectives are torch.distributed's (its default process group, already
        initialised); a world of one needs no process group. torch is imported here, so this
        module imports without it."""
        if world_size == 1:
            return cls(rank, world_size, sidecar, lambda obj: obj, lambda: None, bool)
        import torch
        import torch.distributed as dist

        def broadcast(obj):
            box = [obj]
            dist.broadcast_object_list(box, src=0)
            return box[0]

        def any_true(flag):
            t = torch.tensor([1 if flag else 0])
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return bool(t.item())

        return cls(rank, world_size, sidecar, broadcast, dist.barrier, any_true)

    def _from_rank0(self, call):
        """Run ``call`` on rank 0 and hand its result, or its error, to every rank."""
        outcome = None
        if self.rank == 0:
            try:
                outcome = {"ok": call()}
            except CkptTrainerError as error:
                outcome = {"error": error.to_wire()}
        outcome = self._broadcast(outcome)
        if "error" in outcome:
            raise CkptTrainerError.from_wire(outcome["error"])
        return outcome["ok"]

    def open(self, config, output_root, project, group, name, run_ts=None, credentials=None):
        return self._from_rank0(lambda: self._sidecar.open(config, output_root, project, group, name, run_ts, 0,
                                                           self.world_size, credentials))

    def resume(self):
        return self._from_rank0(self._sidecar.resume if self._sidecar else None)

    def begin_save(self, step, final=False, validation=False, emergency=False, cadence=None):
        return self._from_rank0(lambda: self._sidecar.begin_save(step, final, validation, emergency, cadence))

    def commit(self, save, inventory=None):
        """``inventory`` as in ``Sidecar.commit``; rank 0's is the one sent (DCP gathers it there)."""
        self._barrier()  # every rank's shards are written and fsynced before rank 0 commits
        return self._from_rank0(lambda: self._sidecar.commit(save, inventory))

    def complete_validation(self, iteration):
        return self._from_rank0(lambda: self._sidecar.complete_validation(iteration))

    def should_stop(self):
        decision = self._from_rank0(self._sidecar.should_stop if self._sidecar else None)
        stop = self._any_true(decision.stop or bool(self._flags.seen))
        if not stop:
            return StopDecision(False, None)
        if decision.stop:
            return decision
        if self._flags.seen:
            return StopDecision(True, "signal %s on rank %d" % ("+".join(self._flags.seen), self.rank))
        return StopDecision(True, "a signal caught on another rank")

    def finalize(self):
        self._barrier()
        return self._from_rank0(self._sidecar.finalize if self._sidecar else None)
