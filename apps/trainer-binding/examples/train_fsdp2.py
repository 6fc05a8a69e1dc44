#!/usr/bin/env python3
"""A PyTorch 2 trainer (FSDP2 on CPU, gloo) that saves DCP checkpoints through ckpt-trainer with
the hashing writer, and resumes bit-exactly after any interruption (SIGKILL included).

Start one process per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as torchrun
does), e.g. with torchrun:

    CKPT_TRAINER_BIN="node apps/trainer-binding/dist/bin.js" torchrun --nproc-per-node 2 \\
        apps/trainer-binding/examples/train_fsdp2.py --output-root /tmp/out --steps 12 --save-every 3

Each rank writes its own shards of the model and the AdamW state (torch.distributed.checkpoint,
``state_dict.get_state_dict``) through ``ckpt_dcp.HashingFileSystemWriter``; DCP gathers every
file's digest to rank 0, which commits them with the save. On resume each file is checked against
its recorded digest (``HashingFileSystemReader.from_manifest``) before it is loaded. A batch is a
pure function of (seed, step, rank), so the step is the whole data cursor.
"""

import argparse
import hashlib
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ckpt_dcp import (  # noqa: E402
    DataProcess,
    DirectReader,
    DirectWriter,
    HashingFileSystemReader,
    HashingFileSystemWriter,
    inventory_of,
    refusal_of,
)
from ckpt_trainer_client import RankGroup, Sidecar, fsync_file  # noqa: E402

FEATURES, HIDDEN, BATCH = 32, 64, 16
SHARDED = ("model", "optim")


def log(rank, message):
    print("[train_fsdp2 rank %d] %s" % (rank, message), file=sys.stderr, flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-root", required=True)
    p.add_argument("--project", default="examples")
    p.add_argument("--group", default="fsdp2")
    p.add_argument("--name", default="mlp")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--save-every", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kill-at-step", type=int, default=0,
                   help="SIGKILL every rank when this step begins (tests: an interruption between saves)")
    p.add_argument("--result", default=None, help="rank 0 writes {step, digest, resumed_from} here at the end")
    p.add_argument("--bucket", default=None,
                   help="save straight to this bucket (checkpoint_store.backend object_store): every rank streams "
                        "its shards through its own `ckpt-trainer data` process, nothing is written locally")
    p.add_argument("--credentials", default=None, help="the store's credentials file (default: the environment)")
    return p.parse_args()


def build(seed, mesh):
    torch.manual_seed(seed)  # the same initial weights on every rank, before sharding
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(),
                          nn.Linear(HIDDEN, 1))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)


def batch(seed, step, rank):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 101 + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    return x, x[:, :4].sum(dim=1, keepdim=True).sin()


def train_step(model, optimizer, seed, step, rank):
    x, y = batch(seed, step, rank)
    optimizer.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()


def digest(model):
    """SHA-256 of the full weights (gathered to every rank), in name order."""
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=False))
    h = hashlib.sha256()
    for name in sorted(full):
        h.update(name.encode())
        h.update(full[name].detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def save(group, plan, model, optimizer, step, rank, data):
    log(rank, "saving step %d: model shards" % step)
    model_state, optim_state = get_state_dict(model, optimizer)
    if data is None:
        writers = {name: HashingFileSystemWriter(plan.targets[name]) for name in SHARDED}
    else:
        writers = {name: DirectWriter(plan.targets[name], data) for name in SHARDED}
    dcp.save(model_state, storage_writer=writers["model"])
    log(rank, "saving step %d: optimizer shards" % step)
    dcp.save(optim_state, storage_writer=writers["optim"])
    log(rank, "saving step %d: commit" % step)
    if rank == 0:
        for name in ("trainer", "data"):
            torch.save({"step": step}, plan.targets[name])
            fsync_file(plan.targets[name])
    outcome = group.commit(plan, inventory=inventory_of(writers, plan.dir))
    log(rank, "committed %s at step %d (%s)" % (plan.kind, step, outcome.get("status")))


def reader(point, name, rank, data):
    """The hashing reader of a component (in place on the store when saving direct); a local
    checkpoint committed before its digests were recorded (an older sidecar) is read with the
    stock reader, and says so."""
    if data is not None:
        return DirectReader.from_resume(point, name, data)
    try:
        return HashingFileSystemReader.from_manifest(point.iter_dir, name)
    except Exception as error:  # noqa: BLE001 - only DCP_DIGEST_MISSING falls back
        refusal = refusal_of(error)
        if refusal is None or refusal.code != "DCP_DIGEST_MISSING":
            raise
        log(rank, "%s unchecked: %s" % (name, refusal.detail))
        return FileSystemReader(point.components[name])


def load(point, model, optimizer, rank, data):
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.load(model_state, storage_reader=reader(point, "model", rank, data))
    dcp.load(optim_state, storage_reader=reader(point, "optim", rank, data))
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
    return torch.load(point.components["trainer"], weights_only=True)["step"]


def main():
    args = parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)  # the same float operations in the same order on every run
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (world,))
    group = RankGroup.over_torch_distributed(rank, world, Sidecar.spawn() if rank == 0 else None)
    config = {"save_every": args.save_every, "resume": "auto", "checkpoint_format": "dcp", "save_async": False}
    data = None
    if args.bucket is not None:
        config["checkpoint_store"] = {"backend": "object_store", "bucket": args.bucket,
                                      **({} if args.credentials is None else {"credentials": args.credentials})}
        data = DataProcess.spawn(credentials=args.credentials)  # on every rank: each streams its own shards
    group.open(config, args.output_root, args.project, args.group, args.name)

    model, optimizer = build(args.seed, mesh)
    point = group.resume()
    step = 0
    if point.kind == "checkpoint":
        step = load(point, model, optimizer, rank, data)
        log(rank, "resumed from %s (step %d)" % (point.iter_dir, step))
    while step < args.steps:
        if step + 1 == args.kill_at_step:
            log(rank, "SIGKILL at the start of step %d" % (step + 1))
            os.kill(os.getpid(), signal.SIGKILL)
        train_step(model, optimizer, args.seed, step, rank)
        step += 1
        stop = group.should_stop()
        plan = group.begin_save(step, final=step == args.steps, emergency=stop.stop)
        if plan is not None:
            save(group, plan, model, optimizer, step, rank, data)
        if stop.stop:
            log(rank, "stopping at step %d: %s" % (step, stop.reason))
            break
    final = digest(model)
    group.finalize()
    if data is not None:
        data.close()
    if rank == 0 and args.result:
        with open(args.result, "w") as f:
            json.dump({"step": step, "digest": final, "resumed_from": point.iter_dir}, f)
    # Both ranks leave together: a rank that tore its process group down while the other was still
    # finalizing was seen to abort at exit ("terminate called without an active exception", CI).
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
