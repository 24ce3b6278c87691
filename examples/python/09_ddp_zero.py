"""09_ddp_zero: data parallelism on several processes, and what ZeRO saves, from Python
(examples/09_ddp_zero.cpp's twin). Every rank trains the same MLP with Adam on its share of each
global batch, four ways: DDP (each rank holds everything: the weights, the gradients, Adam's two
moments: 16 bytes per parameter in float32), then ZeRO stages 1, 2 and 3 (Rajbhandari et al. 2020),
which cut the optimizer state, then the gradients, then the weights themselves into one shard per
rank. Bytes per rank for Psi parameters on N ranks, float32 with Adam:
    DDP 16 Psi    ZeRO-1 8 Psi + 8 Psi / N    ZeRO-2 4 Psi + 12 Psi / N    ZeRO-3 16 Psi / N
Each run starts from rank 0's weights and sees the same batches, and ZeRO changes where the numbers
live, not what they are: the script checks that the ranks end with equal weights, that each ZeRO
stage ends where DDP does, that the loss went down, and that the bytes each rank holds are the
formula's (printed beside it). The C++ program reads those bytes from ember's allocator, which the package does not bind;
here they are the tensors the rank keeps: the parameters and gradients as the ZeRO partition reports
them (dp.memory(); under DDP every one whole) and the optimizer's state.

Read next: python/ember/distributed.py (init_process_group from torchrun's variables, DataParallel,
the collectives), python/ember/bind_dist.cpp (their bindings: every collective and wait releases
the GIL), then the C++ they call: dist/data_parallel.h (the one interface this script trains
through), dist/distributed_data_parallel.h (buckets, overlap with backward), dist/ring_all_reduce.h,
dist/zero_partition.h (units, shards, what each stage frees and when), dist/zero_optimizer.h.

    PYTHONPATH=build/python ./ember launch -n 2 python3 examples/python/09_ddp_zero.py
    PYTHONPATH=build/python ./ember launch -n 4 python3 examples/python/09_ddp_zero.py --hidden 1024
"""

import argparse
import datetime

import ember
import ember.distributed as dist
import ember.nn.functional as F
from ember import nn
from ladder_checks import run_checked
from ladder_flags import add_number

FEATURES, CLASSES = 256, 10
STRATEGIES = ["ddp", "zero1", "zero2", "zero3"]


def my_share(step, rank, world, per_rank):
    """The global batch of a step, the same on every rank (labels from a fixed random linear "teacher");
    each rank takes its own rows."""
    teacher = ember.randn(FEATURES, CLASSES, generator=ember.Generator(123))
    x = ember.randn(per_rank * world, FEATURES, generator=ember.Generator(1000 + step))
    y = (x @ teacher).argmax(1)
    rows = slice(rank * per_rank, (rank + 1) * per_rank)
    return x[rows], y[rows]


def job_loss(loss):
    """The job's loss: the mean of the ranks' losses."""
    mean = loss.detach().clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    return mean.item()


def held_bytes(dp, model):
    """Bytes of the tensors this rank keeps for training: parameters and gradients (what the ZeRO
    partition holds; under DDP, where dp.memory() is None, every one whole) and the optimizer's state."""
    zero = dp.memory()
    if zero is None:
        weights = sum(p.nbytes + (p.grad.nbytes if p.grad is not None else 0) for p in model.parameters())
    else:
        weights = zero["parameters"] + zero["gradients"]
    state = sum(t.nbytes for s in dp.optimizer.state.values() for t in s.values() if isinstance(t, ember.Tensor))
    return weights + state


def train(strategy, steps, per_rank, hidden):
    """One run; returns (every parameter flattened at the end, first loss, last loss, bytes held)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ember.manual_seed(100 + rank)  # other weights on each rank: the wrapper starts all from rank 0's
    model = nn.models.MLP(FEATURES, [hidden, hidden], CLASSES)
    # One loop for the four: DataParallel builds DDP around the model or ZeRO around the optimizer (under
    # ZeRO, Adam is built over this rank's shard only), and broadcasts rank 0's weights.
    # stage3_param_persistence_threshold 0: shard every layer, however small, as the formula counts.
    dp = dist.DataParallel(model, ember.optim.Adam, strategy=strategy,
                           zero_options={"stage3_param_persistence_threshold": 0})
    losses = []
    for step in range(steps):
        x, y = my_share(step, rank, world, per_rank)
        loss = F.cross_entropy(dp(x), y)
        loss.backward()  # DDP: returns with the gradients averaged; ZeRO: each rank gets its shard's average
        dp.step()  # ZeRO: steps this rank's shard, then all-gathers the updated weights
        if step == steps - 1:
            held = held_bytes(dp, model)  # before zero_grad, which lets go of DDP's gradients
        dp.zero_grad()
        losses.append(job_loss(loss))
    with dp.gathered():  # stage 3 holds shards: gather them to compare
        weights = ember.cat([p.detach().flatten() for p in model.parameters()])
    return weights, losses[0], losses[-1], held


def ranks_agree(weights):
    """The ranks' weights are bit for bit the same: their checksums' minimum and maximum agree."""
    lowest, highest = weights.double().sum().reshape(1), weights.double().sum().reshape(1)
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    return lowest.item() == highest.item()


def formula_bytes(strategy, psi, n):
    return {"ddp": 16 * psi, "zero1": 8 * psi + 8 * psi / n, "zero2": 4 * psi + 12 * psi / n,
            "zero3": 16 * psi / n}[strategy]


def main():
    parser = argparse.ArgumentParser(description="Step 9 of the example ladder: DDP and ZeRO stages 1-3 on the ranks "
                                     "of a job (./ember launch -n 2 python3 ...).")
    add_number(parser, "--steps", int, 2, 100000, 20, "Adam steps in each of the four runs")
    add_number(parser, "--batch-size", int, 1, 65536, 32, "examples per rank and step")
    add_number(parser, "--hidden", int, 1, 16384, 512, "width of the MLP's two hidden layers")
    add_number(parser, "--timeout", float, 1.0, 3600.0, 60.0,
               "seconds any collective may wait for a rank before failing")
    args = parser.parse_args()

    def body(checks):
        # A dead rank fails the job: every collective waits at most --timeout.
        dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=args.timeout))
        rank, world = dist.get_rank(), dist.get_world_size()
        checks.verbose = rank == 0
        psi = sum(p.numel() for p in nn.models.MLP(FEATURES, [args.hidden, args.hidden], CLASSES).parameters())
        if rank == 0:
            print(f"{world} ranks, an MLP of {psi} parameters, Adam, {args.steps} steps of {args.batch_size} examples "
                  f"per rank\n\n{'run':7} {'MB per rank':>14} {'formula MB':>14} {'ratio':>7} {'last loss':>12} "
                  f"{'max |w - w_DDP|':>16}")
        ddp_weights = None
        for strategy in STRATEGIES:
            weights, first_loss, last_loss, held = train(strategy, args.steps, args.batch_size, args.hidden)
            if ddp_weights is None:
                ddp_weights = weights
            worst = (weights - ddp_weights).abs().max().item()
            formula = formula_bytes(strategy, psi, world)
            name = "DDP" if strategy == "ddp" else f"ZeRO-{strategy[-1]}"
            if rank == 0:
                print(f"{name:7} {held / 1e6:14.3f} {formula / 1e6:14.3f} {held / formula:7.3f} {last_loss:12.4f} "
                      f"{worst:16.3g}")
            checks.expect(ranks_agree(weights), f"{name}: every rank ends with the same weights")
            checks.expect(last_loss < first_loss, f"{name}: the loss went down")
            if strategy != "ddp":
                checks.expect(worst <= 1e-5, f"{name}: the weights end where DDP's do (to float rounding)")
            checks.expect(abs(held / formula - 1) < 0.05, f"{name}: the bytes per rank are the formula's (within 5%)")
        dist.barrier()  # rank 0 serves the store: it stays until every rank is done
        dist.destroy_process_group()

    run_checked("09_ddp_zero", body)


if __name__ == "__main__":
    main()
