#!/usr/bin/env python3
"""A small MLP trained with AdamW that checkpoints through ckpt-trainer and resumes exactly.

Run it unchanged after any interruption: with resume=auto it continues from the latest complete
checkpoint, and the final weights are bit-identical to an uninterrupted run. It saves every
component the sidecar asks for: model and optimizer state, the trainer state (step, python /
numpy / torch RNG of every rank) and the data cursor.

One process:
    CKPT_TRAINER_BIN="node apps/trainer-binding/dist/bin.js" \\
        python3 examples/train_mlp.py --output-root /tmp/out --steps 40 --save-every 10

Several ranks (torch.distributed, gloo on CPU): start one process per rank with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as torchrun does); rank 0 writes the consolidated
components. Sharded DCP checkpoints are examples/train_fsdp2.py's (real
torch.distributed.checkpoint on PyTorch 2).
"""

import argparse
import hashlib
import json
import os
import random
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ckpt_trainer_client import RankGroup, Sidecar, fsync_file  # noqa: E402

DATA_SEED = 20240901
SAMPLES, FEATURES, CLASSES, BATCH = 512, 16, 4, 32


def log(rank, message):
    print("[train_mlp rank %d] %s" % (rank, message), file=sys.stderr, flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-root", required=True)
    p.add_argument("--project", default="demo")
    p.add_argument("--group", default="mlp")
    p.add_argument("--name", default="run")
    p.add_argument("--steps", type=int, required=True, help="optimizer steps of the whole run")
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--resume", default="auto", help="auto | off | an iter_* directory")
    p.add_argument("--resume-sha256", default=None, help="pin an explicit resume to its manifest SHA-256")
    p.add_argument("--config-json", default="{}", help="further checkpoint knobs as a JSON object")
    p.add_argument("--socket", default=None, help="connect to `ckpt-trainer serve --socket PATH`")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--step-ms", type=float, default=0.0, help="sleep per step, standing in for compute")
    p.add_argument("--write-pause-ms", type=float, default=0.0,
                   help="sleep after each component write (tests use it to widen the mid-save window)")
    p.add_argument("--validate-every", type=int, default=0,
                   help="held-out validation every N steps (0: never); with validation.save_checkpoint in "
                        "--config-json the step is saved validation-pending first and published after")
    p.add_argument("--result", default=None, help="write a JSON summary (rank 0) here at the end")
    return p.parse_args()


# --- data: a fixed synthetic set, read through a cursor that survives restarts ----------------

def make_dataset():
    g = torch.Generator().manual_seed(DATA_SEED)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, CLASSES, generator=g)
    y = (x @ w).argmax(dim=1)
    return x, y


class DataCursor:
    """Epoch and position in a per-epoch permutation derived from (seed, epoch): the cursor is
    the only state, so saving two integers makes the next batch exact after a restart."""

    def __init__(self, seed):
        self.seed = seed
        self.epoch = 0
        self.position = 0

    def order(self):
        return torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(self.seed * 1000 + self.epoch))

    def next_batch(self):
        if self.position + BATCH > SAMPLES:
            self.epoch += 1
            self.position = 0
        idx = self.order()[self.position:self.position + BATCH]
        self.position += BATCH
        return idx

    def state_dict(self):
        return {"seed": self.seed, "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state):
        if state["seed"] != self.seed:
            raise SystemExit("data cursor seed %s differs from --seed %s" % (state["seed"], self.seed))
        self.epoch, self.position = state["epoch"], state["position"]


# --- RNG state as plain values (loads without pickled numpy objects) --------------------------

def rng_state():
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state):
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])


# --- model, optimizer, one step ---------------------------------------------------------------

def build(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, CLASSES))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    return model, optimizer


def train_step(model, optimizer, data, cursor, rank, world):
    x, y = data
    idx = cursor.next_batch()[rank::world]  # every rank takes its slice of the global batch
    inputs = x[idx] + torch.from_numpy(np.random.normal(0.0, 0.01, size=(len(idx), FEATURES))).float()
    scale = random.uniform(0.9, 1.1)  # python RNG takes part too
    loss = nn.functional.cross_entropy(model(inputs), y[idx]) * scale
    optimizer.zero_grad()
    loss.backward()
    if world > 1:
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
    optimizer.step()
    return float(loss)


def digest(model):
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


# --- saving and loading the components the sidecar names --------------------------------------

WRITTEN = ("data", "model", "optim", "trainer")


def write_component(name, path, is_dir, ctx):
    model, optimizer, cursor, rank, world, step = ctx["model"], ctx["optimizer"], ctx["cursor"], ctx["rank"], \
        ctx["world"], ctx["step"]
    if is_dir:
        raise SystemExit("component %r is a directory (checkpoint_format dcp): this example writes "
                         "consolidated files; examples/train_fsdp2.py saves DCP" % name)
    if rank != 0:
        return  # file components belong to rank 0 (it gathered what they hold)
    if name == "model":
        obj = model.state_dict()
    elif name == "optim":
        obj = optimizer.state_dict()
    elif name == "trainer":
        obj = {"step": step, "world_size": world, "rng": ctx["rng_by_rank"]}
    elif name == "data":
        obj = cursor.state_dict()
    else:
        raise SystemExit("no writer for component %r" % name)
    torch.save(obj, path)
    fsync_file(path)


def save(group, plan, ctx, pause_s):
    ctx["rng_by_rank"] = gather_rng(ctx)
    # This trainer has no moving old policy or reference: it writes the components it has.
    names = [n for n in sorted(plan.targets) if n in WRITTEN] if not plan.already_committed else []
    for name in names:
        write_component(name, plan.targets[name], name in plan.directories, ctx)
        if pause_s > 0:
            time.sleep(pause_s)
    outcome = group.commit(plan)
    log(ctx["rank"], "committed %s at step %d (%s)" % (plan.kind, plan.step, outcome.get("dir", plan.dir)))


def gather_rng(ctx):
    state = rng_state()
    if ctx["world"] == 1:
        return [state]
    states = [None] * ctx["world"]
    dist.all_gather_object(states, state)
    return states


def load(point, model, optimizer, cursor, rank, world):
    """Restore from the resume point; returns the step to continue from."""
    comps = point.components
    trainer = torch.load(comps["trainer"])
    if trainer["world_size"] != world:
        raise SystemExit("checkpoint was written by %d ranks, this run has %d" % (trainer["world_size"], world))
    model.load_state_dict(torch.load(comps["model"]))
    optimizer.load_state_dict(torch.load(comps["optim"]))
    cursor.load_state_dict(torch.load(comps["data"]))
    set_rng_state(trainer["rng"][rank])
    return trainer["step"]


def validate(model, data, world):
    """Held-out loss on a fixed slice of the data. In eval mode (dropout off) it draws no random
    numbers and changes no state, so a run that validates trains exactly like one that does not."""
    inputs, targets = data
    model.eval()
    try:
        with torch.no_grad():
            loss = nn.functional.cross_entropy(model(inputs[:BATCH * 2]), targets[:BATCH * 2])
    finally:
        model.train()
    if world > 1:
        dist.all_reduce(loss)
        loss /= world
    return float(loss)


def validate_and_publish(group, model, data, ctx, step, validations):
    """Seed 001's durable validation transaction after a pending save: evaluate, then publish."""
    loss = validate(model, data, ctx["world"])
    validations.append({"step": step, "loss": loss})
    published = group.complete_validation(step)
    log(ctx["rank"], "validated step %d (loss %.6f): %s" % (step, loss, published["state"]))


def write_result(path, summary):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    args = parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.set_num_threads(1)  # one thread: the same float operations in the same order every run
    if world > 1:
        dist.init_process_group("gloo")
    sidecar = None
    if rank == 0:
        log(rank, "torch %s ready; starting the checkpoint sidecar" % torch.__version__)
        sidecar = Sidecar.connect(args.socket) if args.socket else Sidecar.spawn()
    group = RankGroup.over_torch_distributed(rank, world, sidecar)

    config = {"save_every": args.save_every, "resume": args.resume, "checkpoint_format": "consolidated"}
    if args.resume_sha256:
        config["resume_sha256"] = args.resume_sha256
    config.update(json.loads(args.config_json))
    attempt = group.open(config, args.output_root, args.project, args.group, args.name)
    for warning in attempt.warnings:
        log(rank, "warning: %s" % warning)

    data = make_dataset()
    model, optimizer = build(args.seed)
    cursor = DataCursor(args.seed)
    random.seed(args.seed + rank)
    np.random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)

    point = group.resume()
    step = 0
    if point.kind == "checkpoint":
        step = load(point, model, optimizer, cursor, rank, world)
        log(rank, "resumed from %s (iter %d): %s" % (point.iter_dir, step, point.reason))
    else:
        log(rank, "fresh start: %s" % point.reason)

    ctx = {"model": model, "optimizer": optimizer, "cursor": cursor, "rank": rank, "world": world}
    pause_s = args.write_pause_ms / 1000.0
    stop_reason = None
    validations = []
    # A checkpoint resumed inside its validation transaction: evaluation-pending re-runs the
    # validation, publication-pending only retries the publication (the validation had passed).
    if point.kind == "checkpoint" and point.validation == "evaluation_pending":
        validate_and_publish(group, model, data, ctx, step, validations)
    elif point.kind == "checkpoint" and point.validation == "publication_pending":
        group.complete_validation(step)
        log(rank, "published the validated step %d on resume" % step)
    model.train()
    while step < args.steps:
        train_step(model, optimizer, data, cursor, rank, world)
        step += 1
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000.0)
        stop = group.should_stop()
        validating = args.validate_every > 0 and step % args.validate_every == 0
        plan = group.begin_save(step, final=step == args.steps, emergency=stop.stop, validation=validating)
        mode = plan.validation if plan is not None else "none"
        if validating and mode == "commit_after":
            validations.append({"step": step, "loss": validate(model, data, world)})
        if plan is not None:
            ctx["step"] = step
            save(group, plan, ctx, pause_s)
        if mode == "pending" and not stop.stop:
            validate_and_publish(group, model, data, ctx, step, validations)
        elif validating and mode in ("none", "commit_before"):
            # Ephemeral validation (no save requested by it), or after the due save it rides on.
            validations.append({"step": step, "loss": validate(model, data, world)})
        if stop.stop:
            stop_reason = stop.reason
            log(rank, "stopping at step %d: %s" % (step, stop.reason))
            break

    group.finalize()
    if rank == 0 and args.result:
        write_result(args.result, {
            "step": step,
            "digest": digest(model),
            "stopped": stop_reason,
            "resumed_from": point.iter_dir,
            "attempt_dir": attempt.attempt_dir,
            "validations": validations,
        })
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
