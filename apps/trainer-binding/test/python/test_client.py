"""Tests of ckpt_trainer_client.py against a live ckpt-trainer sidecar (run by client.test.ts).

Environment: PYTHONPATH holds the client's directory; CKPT_TRAINER_BIN runs the built sidecar.
"""

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from ckpt_trainer_client import CkptTrainerError, RankGroup, Sidecar, fsync_tree

BIN = shlex.split(os.environ["CKPT_TRAINER_BIN"])
# A real two-rank DCP checkpoint (shards and .metadata written by torch.distributed.checkpoint):
# the manager commits a DCP component only when it is complete.
DCP_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "packages",
                           "archive-reader", "test", "fixtures", "dcp-p2")


# What these tests' stand-in trainer has: no moving old policy or reference (the manager offers
# targets for `old` and `ref` too; a trainer writes only the components it has).
HAS = ("model", "optim", "trainer", "data")


def write_components(save):
    """Stand-in state: a small torch.save file per file component (resume opens them as `ckpt verify`
    does), a real DCP directory per directory component."""
    import torch
    for name, path in save.targets.items():
        if name not in HAS:
            continue
        if name in save.directories:
            shutil.copytree(DCP_FIXTURE, path, dirs_exist_ok=True)
        else:
            torch.save({"state": name}, path)
        fsync_tree(path)


class Workspace(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ckpt-client-")
        self.root = self._tmp.name
        self.addCleanup(self._tmp.cleanup)

    def spawn(self, **kwargs):
        sidecar = Sidecar.spawn(**kwargs)
        self.addCleanup(sidecar.close)
        return sidecar

    def open(self, sidecar, **config):
        merged = {"save_every": 2, "save_async": False}
        merged.update(config)
        return sidecar.open(merged, self.root, "proj", "grp", "run")


class ProtocolTests(Workspace):
    def test_hello_negotiates_version_1_and_lists_the_ops(self):
        sidecar = self.spawn()
        self.assertEqual(sidecar.protocol, 1)
        self.assertEqual(sidecar.hello["server"], "ckpt-trainer")
        for op in ("open", "resume", "begin_save", "commit", "should_stop", "finalize"):
            self.assertIn(op, sidecar.hello["ops"])

    def test_a_call_before_open_is_refused_with_a_stable_code(self):
        sidecar = self.spawn()
        with self.assertRaises(CkptTrainerError) as caught:
            sidecar.resume()
        self.assertEqual((caught.exception.code, caught.exception.kind, caught.exception.source),
                         ("SESSION_NOT_OPEN", "input", "protocol"))

    def test_a_misspelled_argument_is_refused_not_ignored(self):
        sidecar = self.spawn()
        with self.assertRaises(CkptTrainerError) as caught:
            sidecar.request("begin_save", step=1, emergncy=True)
        self.assertEqual(caught.exception.code, "PROTOCOL_BAD_REQUEST")
        self.assertIn("emergncy", str(caught.exception))

    def test_a_dead_sidecar_surfaces_as_sidecar_gone(self):
        sidecar = self.spawn()
        os.kill(sidecar.pid, signal.SIGKILL)
        sidecar._process.wait()
        with self.assertRaises(CkptTrainerError) as caught:
            sidecar.should_stop()
        self.assertEqual(caught.exception.code, "SIDECAR_GONE")

    def test_a_hanging_sidecar_yields_sidecar_timeout_naming_the_request_not_a_hang(self):
        sidecar = self.spawn(timeout=30)
        self.open(sidecar)
        os.kill(sidecar.pid, signal.SIGSTOP)  # alive but answering nothing: a hung sidecar
        self.addCleanup(os.kill, sidecar.pid, signal.SIGCONT)
        started = time.monotonic()
        with self.assertRaises(CkptTrainerError) as caught:
            sidecar.request("should_stop", timeout=0.5, signals=[])
        self.assertEqual(caught.exception.code, "SIDECAR_TIMEOUT")
        self.assertIn("request should_stop", str(caught.exception))
        self.assertLess(time.monotonic() - started, 25)  # bounded by the timeout, far below the default
        # The connection is spent: a late answer must never be taken for the next request's.
        os.kill(sidecar.pid, signal.SIGCONT)
        with self.assertRaises(CkptTrainerError) as again:
            sidecar.should_stop()
        self.assertEqual(again.exception.code, "SIDECAR_GONE")
        self.assertIn("timed out", str(again.exception))

    def test_a_sidecar_that_never_answers_hello_times_out_by_the_environment_setting(self):
        os.environ["CKPT_TRAINER_REQUEST_TIMEOUT"] = "0.5"
        self.addCleanup(os.environ.pop, "CKPT_TRAINER_REQUEST_TIMEOUT")
        with self.assertRaises(CkptTrainerError) as caught:
            Sidecar.spawn(command=["sleep", "30"])
        self.assertEqual(caught.exception.code, "SIDECAR_TIMEOUT")
        self.assertIn("request hello", str(caught.exception))
        os.environ["CKPT_TRAINER_REQUEST_TIMEOUT"] = "soon"
        with self.assertRaises(CkptTrainerError) as bad:
            Sidecar.spawn(command=["true"])
        self.assertEqual(bad.exception.code, "CLIENT_BAD_ARGUMENT")

    def test_the_sidecar_exits_when_the_trainer_closes_the_session(self):
        sidecar = self.spawn()
        sidecar.close()
        self.assertEqual(sidecar._process.returncode, 1)  # went away without finalize


class SessionTests(Workspace):
    def test_save_commit_resume_round_trip(self):
        sidecar = self.spawn()
        attempt = self.open(sidecar)
        self.assertTrue(attempt.attempt_dir.startswith(os.path.join(self.root, "proj", "grp", "run")))
        self.assertEqual(attempt.format, "consolidated")
        self.assertEqual(sidecar.resume().kind, "fresh")
        self.assertIsNone(sidecar.begin_save(1))  # off cadence: nothing to save
        save = sidecar.begin_save(2)
        self.assertEqual((save.step, save.kind), (2, "full"))
        self.assertEqual(sorted(save.targets), ["data", "model", "old", "optim", "ref", "trainer"])
        write_components(save)
        outcome = sidecar.commit(save)
        self.assertEqual((outcome["status"], outcome["iteration"], outcome["pointer_advanced"]),
                         ("committed", 2, True))
        self.assertEqual(sidecar.finalize(), {"finalized": True})
        self.assertEqual(sidecar._process.returncode, 0)

        again = self.spawn()
        self.assertEqual(self.open(again).attempt_dir, attempt.attempt_dir)  # resume=auto adopts the attempt
        point = again.resume()
        self.assertEqual((point.kind, point.iteration, point.iter_dir), ("checkpoint", 2, save.dir))
        self.assertEqual(point.components, {name: save.targets[name] for name in HAS})
        self.assertRegex(point.manifest_sha256, "^[0-9a-f]{64}$")
        again.finalize()

    def test_dcp_components_are_directories(self):
        sidecar = self.spawn()
        self.open(sidecar, checkpoint_format="dcp")
        save = sidecar.begin_save(2)
        self.assertEqual(save.directories, frozenset({"model", "optim", "old", "ref"}))
        self.assertFalse(save.targets["model"].endswith("/"))
        write_components(save)
        sidecar.commit(save)
        sidecar.finalize()

    def test_commit_refusals_name_the_save(self):
        sidecar = self.spawn()
        self.open(sidecar)
        save = sidecar.begin_save(2)
        with self.assertRaises(CkptTrainerError) as caught:
            sidecar.begin_save(4)
        self.assertEqual(caught.exception.code, "SAVE_IN_PROGRESS")
        with self.assertRaises(CkptTrainerError) as caught:
            sidecar.request("commit", save_id="nope")
        self.assertEqual(caught.exception.code, "SAVE_UNKNOWN")
        # Nothing was written: the manager refuses the commit and the pointer does not move.
        with self.assertRaises(CkptTrainerError) as caught:
            sidecar.commit(save)
        self.assertEqual(caught.exception.source, "manager")
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(save.dir), "latest_checkpoint.txt")))
        sidecar.finalize()

    def test_a_bad_knob_fails_open_with_the_managers_error(self):
        sidecar = self.spawn()
        with self.assertRaises(CkptTrainerError) as caught:
            self.open(sidecar, save_evry=3)
        self.assertEqual((caught.exception.code, caught.exception.source), ("MANAGER_CONFIG_INVALID", "manager"))
        self.assertIn("save_evry", str(caught.exception))

    def test_should_stop_reports_the_sentinel_file(self):
        log_dir = os.path.join(self.root, "slurm-logs")
        os.makedirs(log_dir)
        env = dict(os.environ, SLURM_LOG_DIR=log_dir)
        sidecar = self.spawn(env=env)
        self.open(sidecar)
        self.assertFalse(sidecar.should_stop().stop)
        with open(os.path.join(log_dir, "SIGUSR1_RECEIVED"), "w"):
            pass
        decision = sidecar.should_stop()
        self.assertTrue(decision.stop)
        self.assertIn("SIGUSR1_RECEIVED", decision.reason)
        save = sidecar.begin_save(3, emergency=True)  # off cadence, but an emergency saves the full plan
        self.assertEqual((save.kind, save.step), ("full", 3))
        write_components(save)
        self.assertEqual(sidecar.commit(save)["iteration"], 3)
        sidecar.finalize()

    def test_a_signal_to_the_trainer_is_a_stop_request_not_a_death(self):
        sidecar = self.spawn()
        self.open(sidecar)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        decision = sidecar.should_stop()
        self.assertEqual((decision.stop, decision.reason), (True, "signal SIGTERM (trainer)"))
        sidecar.finalize()

    def test_a_signal_to_the_sidecar_is_a_stop_request_not_a_death(self):
        sidecar = self.spawn()
        self.open(sidecar)
        os.kill(sidecar.pid, signal.SIGTERM)
        deadline = time.time() + 10
        decision = sidecar.should_stop()
        while not decision.stop and time.time() < deadline:
            time.sleep(0.05)
            decision = sidecar.should_stop()
        self.assertEqual((decision.stop, decision.reason), (True, "signal SIGTERM (sidecar)"))
        sidecar.finalize()


class SocketTests(Workspace):
    def test_serve_on_a_unix_socket_one_client_at_a_time(self):
        path = os.path.join(self.root, "sidecar.sock")
        server = subprocess.Popen(BIN + ["serve", "--socket", path], stderr=subprocess.PIPE)
        self.addCleanup(server.kill)
        deadline = time.time() + 20
        while not os.path.exists(path) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        first = Sidecar.connect(path)
        with self.assertRaises(CkptTrainerError) as caught:
            Sidecar.connect(path)
        self.assertEqual(caught.exception.code, "PROTOCOL_BUSY")
        first.close()  # gone without finalize: the socket serves the next trainer
        time.sleep(0.2)
        second = Sidecar.connect(path)
        self.open(second)
        second.finalize()
        self.assertEqual(server.wait(timeout=20), 0)
        self.assertFalse(os.path.exists(path))  # its own socket is removed

    def test_an_existing_path_is_refused(self):
        path = os.path.join(self.root, "taken")
        with open(path, "w") as f:
            f.write("not ours")
        result = subprocess.run(BIN + ["serve", "--socket", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 1)
        self.assertIn("the path exists", result.stderr)
        with open(path) as f:
            self.assertEqual(f.read(), "not ours")


class RankGroupTests(Workspace):
    """Two ranks as threads with an in-process broadcast/barrier (the trainer's collectives)."""

    def collectives(self, world):
        barrier = threading.Barrier(world, timeout=30)
        slot = {}

        def broadcast_from(rank):
            def broadcast(obj):
                if rank == 0:
                    slot["value"] = obj
                barrier.wait()
                value = slot["value"]
                barrier.wait()
                return value
            return broadcast

        flags = {}

        def any_true_from(rank):
            def any_true(flag):
                flags[rank] = flag
                barrier.wait()
                result = any(flags.values())
                barrier.wait()
                return result
            return any_true

        return broadcast_from, barrier.wait, any_true_from

    def run_ranks(self, body, world=2):
        broadcast_from, barrier, any_true_from = self.collectives(world)
        sidecar = self.spawn(watch_signals=False)
        results, errors = {}, {}

        def run(rank):
            group = RankGroup(rank, world, sidecar if rank == 0 else None, broadcast_from(rank), barrier,
                              any_true_from(rank))
            try:
                results[rank] = body(group)
            except CkptTrainerError as error:
                errors[rank] = error

        threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return results, errors

    def test_every_rank_gets_rank0s_answer(self):
        def body(group):
            attempt = group.open({"save_every": 2, "save_async": False, "checkpoint_format": "dcp"}, self.root,
                                 "proj", "grp", "run")
            point = group.resume()
            save = group.begin_save(2)
            for name in ("model", "optim"):
                os.makedirs(save.targets[name], exist_ok=True)
                shard = "__%d_0.distcp" % group.rank
                shutil.copyfile(os.path.join(DCP_FIXTURE, shard), os.path.join(save.targets[name], shard))
                if group.rank == 0:
                    shutil.copyfile(os.path.join(DCP_FIXTURE, ".metadata"), os.path.join(save.targets[name], ".metadata"))
            if group.rank == 0:
                for name in {"trainer", "data"}:
                    with open(save.targets[name], "wb") as f:
                        f.write(b"small")
            outcome = group.commit(save)
            stop = group.should_stop()
            group.finalize()
            return attempt.attempt_dir, point.kind, save.dir, outcome["iteration"], stop.stop

        results, errors = self.run_ranks(body)
        self.assertEqual(errors, {})
        self.assertEqual(results[0], results[1])
        self.assertEqual(results[0][1:], ("fresh", results[0][2], 2, False))
        shards = sorted(os.listdir(os.path.join(results[0][2], "model")))
        self.assertEqual(shards, [".metadata", "__0_0.distcp", "__1_0.distcp"])

    def test_a_refusal_on_rank0_is_raised_on_every_rank(self):
        results, errors = self.run_ranks(lambda group: group.resume())  # before open
        self.assertEqual(results, {})
        self.assertEqual({r: e.code for r, e in errors.items()}, {0: "SESSION_NOT_OPEN", 1: "SESSION_NOT_OPEN"})

    def test_a_signal_caught_on_one_rank_stops_every_rank(self):
        def body(group):
            group.open({"save_every": 2, "save_async": False}, self.root, "proj", "grp", "run")
            if group.rank == 1:
                group._flags.seen.append("SIGTERM")  # what the flag-only handler records
            stop = group.should_stop()
            group.finalize()
            return stop

        results, errors = self.run_ranks(body)
        self.assertEqual(errors, {})
        self.assertEqual(results[0].reason, "a signal caught on another rank")
        self.assertEqual(results[1].reason, "signal SIGTERM on rank 1")
        self.assertTrue(results[0].stop and results[1].stop)


if __name__ == "__main__":
    unittest.main()
