"""CUDA tensors from Python: moves, ops against the CPU, autograd, DLPack export and import (PyTorch's
CUDA tensors when PyTorch is installed). Skipped where no GPU is visible."""

import numpy as np
import pytest

import ember
from conftest import assert_close, to_numpy

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA device visible")


def test_moves_and_device_attributes():
    t = ember.arange(6.0).reshape(2, 3)
    g = t.cuda()
    assert g.is_cuda and g.device == "cuda:0" and g.device.index == 0
    assert g.to("cpu").tolist() == t.tolist() and g.cpu().tolist() == t.tolist()
    assert ember.zeros(2, device="cuda").device == ember.device("cuda", 0)
    assert "device='cuda:0'" in repr(g)
    with pytest.raises(TypeError, match="cpu"):
        np.asarray(g)


def test_ops_match_the_cpu(rng):
    x = ember.tensor(rng.standard_normal((16, 8)), dtype=ember.float32)
    w = ember.tensor(rng.standard_normal((8, 4)), dtype=ember.float32)
    cpu = (x @ w).tanh().sum(1)
    gpu = (x.cuda() @ w.cuda()).tanh().sum(1)
    assert_close(gpu, to_numpy(cpu), rtol=1e-4, atol=1e-4)
    g = x.cuda()
    g[g > 0] = 0.0
    assert (g.cpu() <= 0).all().item()
    assert g[[0, 3], 1:3].shape == (2, 2)


def test_composed_ops_match_the_cpu(rng):
    x = ember.tensor(rng.standard_normal((3, 4, 5)), dtype=ember.float32)
    w = ember.tensor(rng.standard_normal((5, 2)), dtype=ember.float32)
    for fn in (
        lambda a, b: ember.einsum("bij,jk->bik", a, b),
        lambda a, b: ember.einsum("bii->bi", a[:, :, :4]),
        lambda a, b: a.flip((0, 2)).roll(2, 1),
        lambda a, b: a.tril(-1) + a.triu(2),
        lambda a, b: ember.meshgrid(b[:, 0], b[0])[0],
    ):
        assert_close(fn(x.cuda(), w.cuda()), to_numpy(fn(x, w)), rtol=1e-5, atol=1e-5)


def test_autograd_on_the_gpu():
    x = ember.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.device == "cuda:0" and x.grad.tolist() == [2.0, 4.0]


def test_dlpack_round_trip_on_the_gpu():
    g = ember.arange(8.0, device="cuda")
    assert g.__dlpack_device__() == (2, 0)
    u = ember.from_dlpack(g.__dlpack__(stream=None))
    assert u.data_ptr() == g.data_ptr() and u.device == "cuda:0"
    bf = ember.ones(4, dtype=ember.bfloat16, device="cuda")
    assert ember.from_dlpack(bf.__dlpack__(max_version=(1, 0))).dtype is ember.bfloat16


def test_torch_cuda_interchange():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    g = ember.arange(6.0, device="cuda").reshape(2, 3)
    pt = torch.from_dlpack(g)
    assert pt.data_ptr() == g.data_ptr() and pt.is_cuda
    pt.add_(1)
    assert g.cpu().tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    src = torch.arange(5.0, device="cuda")
    e = ember.from_dlpack(src)
    assert e.data_ptr() == src.data_ptr() and e.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    del src
    assert e.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # the capsule keeps torch's memory


def test_current_device_and_memory_figures():
    ember.cuda.set_device("cuda:0")
    assert ember.cuda.current_device() == 0
    ember.cuda.synchronize()
    before = ember.cuda.memory_allocated()
    ember.cuda.reset_peak_memory_stats()
    t = ember.empty(1 << 20, device="cuda")  # 4 MiB
    assert ember.cuda.memory_allocated(0) == before + (4 << 20)
    assert ember.cuda.max_memory_allocated() >= before + (4 << 20)
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    stats = ember.cuda.memory_stats(ember.device("cuda", 0))
    assert stats["allocated_bytes.all.current"] == before + (4 << 20) and stats["allocation.all.current"] >= 1
    del t
    ember.cuda.synchronize()
    assert ember.cuda.memory_allocated() == before
    assert ember.cuda.max_memory_allocated() >= before + (4 << 20)  # the peak stays until reset
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() <= stats["reserved_bytes.all.current"]
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == before


def test_events_time_work_and_streams_order_it():
    a = ember.randn(1024, 1024, device="cuda")
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a = a @ a / 32
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0
    side = ember.cuda.Stream()
    assert side.device == "cuda:0" and side.cuda_stream != 0
    x = ember.ones(1 << 20, device="cuda")
    side.wait_stream(ember.cuda.Stream())  # an empty stream: nothing to wait for
    with ember.cuda.stream(side):
        y = x * 3  # queued on side
    done = ember.cuda.Event()
    done.record(side)
    done.wait()  # the current stream waits for side's work
    assert (y + 0).sum().item() == 3 * (1 << 20)
    side.synchronize()
    with ember.cuda.stream(None):
        assert (x * 2).sum().item() == 2 * (1 << 20)


def test_a_python_data_set_loads_pinned_batches():
    from ember.utils.data import DataLoader, TensorDataset

    data = TensorDataset(ember.arange(8.0).reshape(4, 2), ember.arange(4))
    for workers in (0, 1):
        batches = list(DataLoader(data, batch_size=2, num_workers=workers, pin_memory=True))
        assert all(x.is_pinned() and y.is_pinned() for x, y in batches)
        assert batches[1][0].cuda(non_blocking=True).cpu().tolist() == [[4.0, 5.0], [6.0, 7.0]]


def test_a_python_step_replays_from_a_cuda_graph_as_it_ran_eagerly():
    from test_compiled_step import data, sgd_training

    batches = [(x.cuda(), y.cuda()) for x, y in data(7)[5:]]  # past the overflowed batch
    batches += [(x * 0.5, y) for x, y in batches] * 2
    _, _, eager_step = sgd_training("cuda")
    eager = [eager_step(x, y).item() for x, y in batches]
    _, opt, step = sgd_training("cuda")
    compiled = ember.compile_step(step, optimizers=[opt], warmup_steps=2)
    assert [compiled(x, y).item() for x, y in batches] == eager
    assert compiled.stats == {"eager": 2, "captures": 1, "replays": 4}
