"""One rank of test_distributed.py's 2-rank job (launched by tools/launch.py with torchrun's variables).

Each rank trains on its half of a global batch under each data-parallel wrapper, and compares the
parameters with a single-process run on the whole batch computed here too (same initial values:
rank 0's, which the wrappers broadcast); it also checks the collectives. It writes what it measured to
<out>/rank<r>.json for the test to judge."""

import datetime
import json
import os
import sys

import numpy as np

import ember  # the same package as the test's: PYTHONPATH reaches the ranks through the launcher
import ember.distributed as dist
import ember.nn as nn
import ember.nn.functional as F

STEPS = 4


class Net(nn.Module):
    """A Python module: two built-in Linear layers, a parameter of its own and a buffer."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 4)
        self.scale = nn.Parameter(ember.ones(4))
        self.register_buffer("calls", ember.zeros((), dtype=ember.int64))

    def forward(self, x):
        self.calls += 1
        return self.fc2(self.fc1(x).tanh()) * self.scale


def flat(module):
    return np.concatenate([np.array(p.detach().double()).ravel() for p in module.parameters()])


def batches(rank, world):
    """STEPS global batches of 8 (the same on every rank) and this rank's half of each."""
    gen = ember.Generator(1234)
    out = []
    for _ in range(STEPS):
        x = ember.randn(8, 6, generator=gen)
        y = ember.randint(0, 4, (8,), generator=gen)
        per = 8 // world
        out.append((x, y, x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]))
    return out


def train_steps(forward, opt, batches):
    """One step per (x, y): the cross entropy of forward(x) against y, zero_grad, backward, step."""
    for x, y in batches:
        loss = F.cross_entropy(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def reference(make_model, make_optimizer, data):
    """The single-process run on the whole batches, from rank 0's initial values."""
    ember.manual_seed(0)
    model = make_model()
    train_steps(model, make_optimizer(model.parameters()), [(x, y) for x, y, _, _ in data])
    return flat(model)


def agreement(vec, make_model, make_optimizer, data):
    """How far this rank's weights are from the single-process reference, and from the other ranks'."""
    return {"vs_reference": float(np.abs(vec - reference(make_model, make_optimizer, data)).max()),
            "across_ranks": max_rank_difference(vec)}


def max_rank_difference(vec):
    """The largest difference between this rank's vector and any other rank's (gathered)."""
    mine = ember.tensor(vec)
    world = dist.get_world_size()
    gathered = [ember.zeros_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    return float(max(np.abs(np.array(g) - vec).max() for g in gathered))


def main():
    out_dir = sys.argv[1]
    dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    data = batches(rank, world)
    result = {"rank": rank, "world": world, "env_rank": int(os.environ["RANK"])}

    # ---- collectives
    t = ember.tensor([1.0, 2.0]) * (rank + 1)
    dist.all_reduce(t)
    result["all_reduce_sum"] = t.tolist()
    t = ember.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    result["all_reduce_max"] = t.tolist()
    t = ember.tensor([float(rank + 1)])
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    work.wait(timeout=60)
    result["all_reduce_avg"] = t.tolist()
    t = ember.full((3,), float(rank + 5))
    dist.broadcast(t, src=1)
    result["broadcast"] = t.tolist()
    gathered = [ember.zeros(2, dtype=ember.int64) for _ in range(world)]
    dist.all_gather(gathered, ember.full((2,), rank, dtype=ember.int64))
    result["all_gather"] = [g.tolist() for g in gathered]
    dist.barrier()

    sgd = lambda params: ember.optim.SGD(params, lr=0.1, momentum=0.9)  # noqa: E731
    adamw = lambda params: ember.optim.AdamW(params, lr=0.01)  # noqa: E731

    # ---- DDP of a Python module (mirrored in C++ by a bridge)
    ember.manual_seed(rank)  # each rank starts elsewhere: DDP broadcasts rank 0's values
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = sgd(ddp.parameters())
    train_steps(ddp, opt, [(x, y) for _, _, x, y in data])
    vec = flat(model)
    result["ddp_python"] = {**agreement(vec, Net, sgd, data), "calls": model.calls.item(),
                            "buckets": len(ddp.buckets())}

    # ---- DDP of a built-in model (its forward in C++ under the wrapper)
    def mlp():
        return nn.models.MLP(6, [16], 4)

    ember.manual_seed(rank)
    model = mlp()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = sgd(model.parameters())
    train_steps(ddp, opt, [(x, y) for _, _, x, y in data])
    vec = flat(model)
    result["ddp_builtin"] = agreement(vec, mlp, sgd, data)

    # ---- gradient accumulation with no_sync: two half steps equal one whole
    ember.manual_seed(0)
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = sgd(model.parameters())
    for _, _, x, y in data:
        opt.zero_grad()
        with ddp.no_sync():
            (F.cross_entropy(ddp(x[:2]), y[:2]) / 2).backward()
        (F.cross_entropy(ddp(x[2:]), y[2:]) / 2).backward()
        opt.step()
    vec = flat(model)
    result["ddp_no_sync"] = agreement(vec, Net, sgd, data)

    # ---- ZeRO stage 2 over a Python module
    ember.manual_seed(rank)
    model = Net()
    zero = dist.ZeroOptimizer(model, ember.optim.AdamW, stage=2, lr=0.01)
    for _, _, x, y in data:
        F.cross_entropy(model(x), y).backward()
        zero.step()
        zero.zero_grad()
    vec = flat(model)
    result["zero2"] = {**agreement(vec, Net, adamw, data), "lr": zero.param_groups[0]["lr"]}

    # ---- FSDP: DataParallel with ZeRO-3 (parameters gathered around each Linear's forward)
    ember.manual_seed(rank)
    model = Net()
    dp = dist.DataParallel(model, ember.optim.AdamW, strategy="zero3", lr=0.01,
                           zero_options={"stage3_param_persistence_threshold": 0})
    for _, _, x, y in data:
        F.cross_entropy(dp(x), y).backward()
        dp.step()
        dp.zero_grad()
    with dp.gathered():
        vec = flat(model)
    result["zero3"] = {**agreement(vec, Net, adamw, data), "units": len(dp.units())}

    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
