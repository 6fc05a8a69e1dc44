"""Times 2-rank DCP saves (gloo, CPU) with the stock FileSystemWriter and ckpt_dcp's
HashingFileSystemWriter on the same state, alternating, in one run (driven by dcp-hashing.bench.mjs).

argv: WORK_DIR TOTAL_MIB TENSOR_MIB REPS RESULT_JSON. Each rank holds TOTAL_MIB / 2 of random
float32 shards (DTensors sharded on dim 0). Each save goes to a fresh directory, removed after it,
except the last hashing one (WORK_DIR/kept), which the publish half of the benchmark reuses.
"""

import hashlib
import json
import os
import shutil
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard

from ckpt_dcp import HashingFileSystemWriter

WORLD = 2


def warm_free_memory(path, nbytes):
    """Takes back free memory this VM guest may have returned to the host, so that neither writer
    pays the host's page faults for its page cache (see warmFreeMemory in lib.mjs)."""
    chunk = b"\1" * (8 << 20)
    with open(path, "wb") as f:
        for _ in range(0, nbytes, len(chunk)):
            f.write(chunk)
    os.remove(path)


def rank_main(rank, work, total_mib, tensor_mib, reps, result):
    dist.init_process_group("gloo", init_method="file://" + os.path.join(work, "pg"), rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    rows = tensor_mib * (1 << 20) // 4 // 1024 // WORLD  # this rank's rows of one tensor, 1024 float32 wide
    generator = torch.Generator().manual_seed(rank)
    state = {"t%04d" % i: DTensor.from_local(torch.rand(rows, 1024, generator=generator), mesh, [Shard(0)])
             for i in range(total_mib // tensor_mib)}
    times = {"stock": [], "hashing": []}
    inventory = None
    # Untimed: the first save of a process pays DCP's and gloo's one-time set-up.
    dcp.save(state, storage_writer=FileSystemWriter(os.path.join(work, "first")))
    dist.barrier()
    if rank == 0:
        shutil.rmtree(os.path.join(work, "first"))
    for rep in range(reps):
        for kind in ("stock", "hashing") if rep % 2 == 0 else ("hashing", "stock"):
            path = os.path.join(work, "kept" if kind == "hashing" and rep == reps - 1 else "%s-%d" % (kind, rep))
            writer = FileSystemWriter(path) if kind == "stock" else HashingFileSystemWriter(path)
            warm_free_memory(os.path.join(work, "warm-%d" % rank), total_mib << 20)
            dist.barrier()
            started = time.perf_counter()
            dcp.save(state, storage_writer=writer)
            dist.barrier()
            times[kind].append(time.perf_counter() - started)
            if kind == "hashing" and rank == 0:
                inventory = writer.inventory
            dist.barrier()
            if rank == 0 and not path.endswith("kept"):
                shutil.rmtree(path)
    if rank == 0:
        kept = os.path.join(work, "kept")
        # Not timed: the digests the writer reported are the files' (a benchmark of wrong digests is void).
        for entry in inventory:
            with open(os.path.join(kept, entry["path"]), "rb") as f:
                assert hashlib.file_digest(f, "sha256").hexdigest() == entry["sha256"], entry["path"]
        with open(result, "w") as f:
            json.dump({"times": times, "inventory": inventory, "dir": kept}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    work, total, tensor, reps, result = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    mp.start_processes(rank_main, args=(work, total, tensor, reps, result), nprocs=WORLD, start_method="spawn")
