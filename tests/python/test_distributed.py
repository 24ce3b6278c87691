"""ember.distributed: a 2-rank job launched as torchrun would (tools/launch.py sets RANK, WORLD_SIZE,
MASTER_ADDR, ...) checks the collectives, and that DDP, ZeRO-2 and ZeRO-3 leave both ranks with equal
parameters, equal to a single-process run on the whole batch (dist_worker.py); plus a one-rank group
in this process."""

import json
import os
import subprocess
import sys

import pytest

import ember
import ember.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "..", "..", "tools", "launch.py")

# Parameters after 4 steps against the single-process run: measured 3.0e-8 (float32 rounding of
# a different summation order: the gradient averaged over two half batches); 30x that allowed.
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def two_rank_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, LAUNCH, "-n", "2", "--timeout", "120", "--tag-output", sys.executable,
           os.path.join(HERE, "dist_worker.py"), str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"the 2-rank job failed:\n{proc.stdout}\n{proc.stderr}"
    results = []
    for rank in range(2):
        with open(out / f"rank{rank}.json") as f:
            results.append(json.load(f))
    return results


def test_ranks_and_collectives(two_rank_results):
    for rank, r in enumerate(two_rank_results):
        assert r["rank"] == rank == r["env_rank"] and r["world"] == 2
        assert r["all_reduce_sum"] == [3.0, 6.0]
        assert r["all_reduce_max"] == [1.0]
        assert r["all_reduce_avg"] == [1.5]
        assert r["broadcast"] == [6.0, 6.0, 6.0]
        assert r["all_gather"] == [[0, 0], [1, 1]]


@pytest.mark.parametrize("case", ["ddp_python", "ddp_builtin", "ddp_no_sync", "zero2", "zero3"])
def test_data_parallel_equals_one_process_on_the_whole_batch(two_rank_results, case):
    for r in two_rank_results:
        assert r[case]["across_ranks"] == 0.0, f"rank {r['rank']}: the ranks' parameters differ"
        assert r[case]["vs_reference"] <= TOLERANCE, f"rank {r['rank']}: {r[case]['vs_reference']}"
    assert two_rank_results[0]["ddp_python"]["calls"] == 4  # the Python forward ran under the C++ wrapper
    assert two_rank_results[0]["zero3"]["units"] == 3  # fc1, fc2 and the root's own parameter


def test_one_rank_group_in_process():
    with pytest.raises(ember.StateError, match="not initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="world_size must be at least 1"):
        dist.init_process_group("gloo", rank=0, world_size=-3)
    with pytest.raises(ValueError, match="rank must be at least 0"):
        dist.init_process_group("gloo", rank=-2, world_size=1)
    # A world of one needs no launcher: its store takes any free port.
    group = dist.init_process_group("gloo", rank=0, world_size=1, timeout=30)
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        assert dist.get_backend() == "gloo" and group.timeout_s() == 30
        t = ember.tensor([1.0, 2.0])
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        assert t.tolist() == [1.0, 2.0]
        with pytest.raises(ember.StateError):
            dist.init_process_group("gloo", rank=0, world_size=1)
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_data_parallel_reports_its_partition():
    # DataParallel, like ZeroOptimizer, says what the ZeRO partition holds (None under DDP, which has none).
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=30)
    try:
        model = ember.nn.Linear(4, 3)
        numel = sum(p.numel() for p in model.parameters())
        zero = dist.DataParallel(model, ember.optim.SGD, strategy="zero2", lr=0.1)
        memory = zero.memory()
        assert set(memory) == {"parameters", "gradients", "offloaded"}
        assert memory["parameters"] >= 4 * numel and memory["offloaded"] == 0
        units = zero.units()  # one unit here: both parameters in one flat buffer, each 64-byte aligned in it
        assert sorted(name for u in units for name in u["parameters"]) == ["bias", "weight"]
        assert sum(u["numel"] for u in units) >= numel
        ddp = dist.DataParallel(ember.nn.Linear(4, 3), ember.optim.SGD, strategy="ddp", lr=0.1)
        assert ddp.memory() is None and ddp.units() is None
    finally:
        dist.destroy_process_group()
