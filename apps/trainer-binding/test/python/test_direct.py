"""Tests of the direct object-store primary from the ranks (ckpt_dcp's DirectWriter/DirectReader
through each rank's `ckpt-trainer data` process), against the real S3 server (run by
direct.s3.test.ts).

Environment: as test_dcp.py, plus CKPT_DIRECT_BUCKET (a fresh bucket) and CKPT_DIRECT_CREDENTIALS
(its credentials file).
"""

import os
import tempfile
import unittest

import torch
import torch.distributed.checkpoint as dcp

import test_dcp
from ckpt_dcp import DataProcess, DirectReader, DirectWriter, refusal_of

BUCKET = os.environ.get("CKPT_DIRECT_BUCKET", "")
CREDENTIALS = os.environ.get("CKPT_DIRECT_CREDENTIALS", "")

def direct(project):
    return ("--bucket", BUCKET, "--credentials", CREDENTIALS, "--project", project)


class DirectPrimaryTests(unittest.TestCase):
    def test_a_damaged_remote_shard_is_refused_by_digest(self):
        uri = "s3://%s/damaged/model" % BUCKET
        state = {"w": torch.randn(300, 40), "b": torch.arange(7)}
        with DataProcess.spawn(credentials=CREDENTIALS) as data:
            writer = DirectWriter(uri, data)
            dcp.save(state, storage_writer=writer, no_dist=True)
            expected = {e["path"]: e["sha256"] for e in writer.inventory}
            self.assertEqual(sorted(expected), [".metadata", "__0_0.distcp"])
            loaded = {"w": torch.zeros(300, 40), "b": torch.zeros(7, dtype=torch.long)}
            dcp.load(loaded, storage_reader=DirectReader(uri, data, expected), no_dist=True)
            self.assertTrue(torch.equal(loaded["w"], state["w"]) and torch.equal(loaded["b"], state["b"]))
            # Overwrite the shard's bytes in the bucket: same size, one byte changed.
            conn = data.connect()
            shard = conn.get(uri + "/__0_0.distcp", 0, 1 << 30)
            shard[len(shard) // 2] ^= 0xFF
            conn.close()
            upload = DirectWriter(uri, data).fs
            with upload.create_stream(uri + "/__0_0.distcp", "wb") as stream:
                stream.write(bytes(shard))
            with self.assertRaises(BaseException) as caught:
                dcp.load(loaded, storage_reader=DirectReader(uri, data, expected), no_dist=True)
            refusal = refusal_of(caught.exception)
            self.assertIsNotNone(refusal, caught.exception)
            self.assertEqual(refusal.code, "DCP_DIGEST_MISMATCH")
            self.assertIn("__0_0.distcp", refusal.detail)

    def test_killed_mid_save_the_unchanged_command_resumes_from_the_store_bit_exactly(self):
        """CKPT_CRASH_KILLS (default 20) SIGKILLs of both ranks inside saves to the store (see
        test_dcp.crash_loop), each followed by the unchanged command, resuming in place."""
        with tempfile.TemporaryDirectory(prefix="ckpt-direct-") as root:
            test_dcp.crash_loop(self, root, direct, test_dcp.crash_kills(20), "fsdp2-direct")
            # No local copy of any shard: only the staged control files ever lived on disk.
            local = [n for _d, _s, files in os.walk(root) for n in files if n.endswith(".distcp")]
            self.assertEqual(local, [])

if __name__ == "__main__":
    unittest.main()
