#!/usr/bin/env python3
"""Direct-to-store DCP save throughput against a local save of the same state, in one process,
alternating (issue 15 §4's note).

    CKPT_TRAINER_BIN="node apps/trainer-binding/dist/bin.js" python tools/bench/dcp_direct.py \\
        --uri s3://bucket/bench --credentials creds.json --dir /tmp/bench --mib 256 --reps 3

local: ckpt_dcp.HashingFileSystemWriter into --dir (page cache, fsync on, as a trainer saves);
direct: ckpt_dcp.DirectWriter through one `ckpt-trainer data` process to --uri. Prints MiB/s of
each repetition and the medians.
"""

import argparse
import os
import shutil
import statistics
import sys
import time

import torch
import torch.distributed.checkpoint as dcp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps", "trainer-binding",
                                "python"))
from ckpt_dcp import DataProcess, DirectWriter, HashingFileSystemWriter  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--uri", required=True)
    p.add_argument("--credentials", default=None)
    p.add_argument("--dir", required=True)
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--tensor-mib", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    per = args.tensor_mib << 18  # float32 elements
    state = {"t%d" % i: torch.randn(per) for i in range(max(1, args.mib // args.tensor_mib))}
    mib = sum(t.numel() * 4 for t in state.values()) / (1 << 20)
    rates = {"local": [], "direct": []}
    with DataProcess.spawn(credentials=args.credentials) as data:
        for rep in range(args.reps):
            for kind in ("local", "direct"):
                if kind == "local":
                    target = os.path.join(args.dir, "rep%d" % rep)
                    writer = HashingFileSystemWriter(target)
                else:
                    writer = DirectWriter("%s/rep%d" % (args.uri.rstrip("/"), rep), data)
                start = time.perf_counter()
                dcp.save(state, storage_writer=writer, no_dist=True)
                seconds = time.perf_counter() - start
                rates[kind].append(mib / seconds)
                print("%s rep %d: %.0f MiB in %.2f s, %.1f MiB/s" % (kind, rep, mib, seconds, mib / seconds), flush=True)
                if kind == "local":
                    shutil.rmtree(target)
    for kind, values in rates.items():
        print("median %s: %.1f MiB/s" % (kind, statistics.median(values)))


if __name__ == "__main__":
    main()
