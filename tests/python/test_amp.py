"""ember.amp: autocast regions (dtype of the ops inside, nesting, the decorator form) and the GradScaler
(scaling, skipping a step on non-finite gradients, backoff and growth, state dict)."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from conftest import to_numpy


def test_matmul_inside_autocast_is_bfloat16():
    a, b = ember.randn(4, 8), ember.randn(8, 3)
    with ember.amp.autocast("cpu", dtype=ember.bfloat16):
        assert ember.amp.is_autocast_enabled("cpu")
        out = a @ b
        assert out.dtype is ember.bfloat16
        with ember.amp.autocast("cpu", enabled=False):
            assert (a @ b).dtype is ember.float32
        assert (a @ b).dtype is ember.bfloat16
    assert not ember.amp.is_autocast_enabled("cpu")
    assert (a @ b).dtype is ember.float32
    ref = to_numpy(a.bfloat16().float() @ b.bfloat16().float())
    np.testing.assert_allclose(to_numpy(out), ref, rtol=2e-2, atol=2e-2)
    with ember.autocast(device_type="cpu", dtype=ember.bfloat16):  # torch.autocast's top-level name
        assert (a @ b).dtype is ember.bfloat16 and ember.einsum("ik,kj->ij", a, b).dtype is ember.bfloat16


def test_autocast_layers_and_gradients():
    lin = nn.Linear(8, 4)
    x = ember.randn(2, 8)
    with ember.amp.autocast("cpu", dtype=ember.bfloat16):
        y = lin(x)
        loss = F.cross_entropy(y, ember.tensor([0, 3]))  # losses run in float32
    assert y.dtype is ember.bfloat16 and loss.dtype is ember.float32
    loss.backward()
    assert lin.weight.grad.dtype is ember.float32  # the master weight gets its gradient in its dtype


def test_autocast_decorator_and_errors():
    @ember.amp.autocast("cpu", dtype=ember.float16)
    def f(a, b):
        return a @ b

    assert f(ember.randn(2, 2), ember.randn(2, 2)).dtype is ember.float16
    assert not ember.amp.is_autocast_enabled("cpu")
    # (tensor/autocast.h documents DTypeError; the C++ raises ValueError: either is an ember.Error.)
    with pytest.raises(ember.Error, match="float16 or bfloat16"):
        with ember.amp.autocast("cpu", dtype=ember.float64):
            pass
    assert not ember.amp.is_autocast_enabled("cpu")
    with pytest.raises(ember.DeviceError):
        ember.amp.autocast("tpu").__enter__()


def test_grad_scaler_skips_a_step_on_inf_gradients():
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    opt = ember.optim.SGD([p], lr=0.1)
    scaler = ember.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
    # An overflowing step: skipped, and the scale backs off.
    loss = (p * float("inf")).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    assert scaler._found_inf(opt).item() == 1.0
    scaler.update()
    assert p.tolist() == [1.0, 2.0]
    assert scaler.get_scale() == 512.0
    # A clean step: the gradients are unscaled before the update, and the scale grows.
    opt.zero_grad()
    loss = (p * p).sum()
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(512.0 * 5.0)
    scaled.backward()
    assert p.grad.tolist() == pytest.approx([512.0 * 2, 512.0 * 4])
    scaler.unscale_(opt)  # what a clip before the step needs
    assert p.grad.tolist() == pytest.approx([2.0, 4.0])
    scaler.step(opt)
    scaler.update()
    assert p.tolist() == pytest.approx([1.0 - 0.1 * 2, 2.0 - 0.1 * 4])
    assert scaler.get_scale() == 1024.0


def test_grad_scaler_state_dict_and_misuse():
    scaler = ember.amp.GradScaler(init_scale=8.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    sd = scaler.state_dict()
    assert sd == {"scale": 8.0, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 3, "_growth_tracker": 0}
    other = ember.amp.GradScaler()
    other.load_state_dict(sd)
    assert other.get_scale() == 8.0 and other.state_dict() == sd
    p = nn.Parameter(ember.ones(1))
    opt = ember.optim.SGD([p], lr=0.1)
    scaler.scale(p.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(ember.StateError):
        scaler.unscale_(opt)
    disabled = ember.amp.GradScaler(enabled=False)
    loss = p.sum()
    assert disabled.scale(loss) is loss or disabled.scale(loss).is_same(loss)
    with pytest.raises(ember.ValueError):
        ember.amp.GradScaler(growth_factor=0.5)


@pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA device")
def test_cuda_autocast_and_scaler_step():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).cuda()
    assert model[0].weight.is_cuda
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cuda")
    x = ember.randn(8, 16, device="cuda")
    y = ember.randint(0, 4, (8,), device="cuda")
    with ember.amp.autocast("cuda"):
        out = model(x)
        loss = F.cross_entropy(out, y)
    assert out.dtype is ember.float16 and loss.dtype is ember.float32
    before = model[0].weight.detach().cpu().clone()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert not model[0].weight.detach().cpu().equal(before)
    assert scaler.get_scale() == 65536.0
