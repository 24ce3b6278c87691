"""ember.optim: each optimizer's steps against PyTorch's formulas written in NumPy (float64 tensors, so the
comparison is tight), param groups and their hyperparameters, state dicts, and gradient clipping."""

import numpy as np
import pytest

import ember
import ember.nn as nn
from conftest import to_numpy

P0 = np.array([0.5, -1.25, 2.0, 0.0, -0.3])
GRADS = [np.array([0.1, -0.2, 0.3, 0.4, -0.5]), np.array([-0.3, 0.1, 0.0, 0.2, 0.6]), np.array([0.2, 0.2, -0.1, -0.4, 0.1])]


def run(opt_class, steps=3, **kwargs):
    """The parameter after each step of opt_class from P0 with GRADS (float64)."""
    p = nn.Parameter(ember.tensor(P0, dtype=ember.float64))
    opt = opt_class([p], **kwargs)
    out = []
    for g in GRADS[:steps]:
        p.grad = ember.tensor(g, dtype=ember.float64)
        opt.step()
        out.append(to_numpy(p))
    return out, opt, p


def sgd_ref(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p, buf, out = P0.copy(), None, []
    for g in GRADS:
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p.copy())
    return out


def adam_ref(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False):
    p, m, v, vmax, out = P0.copy(), np.zeros(5), np.zeros(5), np.zeros(5), []
    b1, b2 = betas
    for t, g in enumerate(GRADS, start=1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        bc1, bc2 = 1 - b1**t, 1 - b2**t
        second = np.maximum(vmax, v) if amsgrad else v
        vmax = second
        p = p - lr / bc1 * m / (np.sqrt(second) / np.sqrt(bc2) + eps)
        out.append(p.copy())
    return out


def lamb_ref(lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
    p, m, v, out = P0.copy(), np.zeros(5), np.zeros(5), []
    b1, b2 = betas
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        r = m / (1 - b1**t) / (np.sqrt(v / (1 - b2**t)) + eps) + weight_decay * p
        pn, rn = np.linalg.norm(p), np.linalg.norm(r)
        trust = pn / rn if pn > 0 and rn > 0 else 1.0
        p = p - lr * trust * r
        out.append(p.copy())
    return out


CASES = [
    (ember.optim.SGD, dict(lr=0.1), sgd_ref(0.1)),
    (ember.optim.SGD, dict(lr=0.1, momentum=0.9), sgd_ref(0.1, momentum=0.9)),
    (ember.optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
     sgd_ref(0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    (ember.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
     sgd_ref(0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    (ember.optim.Adam, dict(lr=0.01), adam_ref(0.01)),
    (ember.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
     adam_ref(0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (ember.optim.Adam, dict(lr=0.01, amsgrad=True), adam_ref(0.01, amsgrad=True)),
    (ember.optim.AdamW, dict(lr=0.01), adam_ref(0.01, weight_decay=1e-2, decoupled=True)),
    (ember.optim.AdamW, dict(lr=0.02, weight_decay=0.5, amsgrad=True),
     adam_ref(0.02, weight_decay=0.5, amsgrad=True, decoupled=True)),
    (ember.optim.LAMB, dict(lr=0.01), lamb_ref(0.01)),
    (ember.optim.LAMB, dict(lr=0.1, betas=(0.5, 0.9), weight_decay=0.0), lamb_ref(0.1, betas=(0.5, 0.9), weight_decay=0.0)),
]


@pytest.mark.parametrize("opt_class,kwargs,expected", CASES, ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_step_matches_pytorch_formula(opt_class, kwargs, expected):
    got, _, _ = run(opt_class, **kwargs)
    for step, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14, err_msg=f"step {step + 1}")


def test_state_names_follow_pytorch():
    _, opt, p = run(ember.optim.Adam, lr=0.01, amsgrad=True)
    state = opt.state[p]
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert state["step"].item() == 3
    _, opt, p = run(ember.optim.SGD, lr=0.1, momentum=0.9)
    assert "momentum_buffer" in opt.state[p]


def test_param_groups_and_hyperparameters():
    a = nn.Parameter(ember.ones(2, dtype=ember.float64))
    b = nn.Parameter(ember.ones(2, dtype=ember.float64))
    opt = ember.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5, "name": "head"}], lr=0.1, momentum=0.0)
    assert len(opt.param_groups) == 2
    g0, g1 = opt.param_groups
    assert g0["lr"] == 0.1 and g1["lr"] == 0.5 and g1["name"] == "head"
    assert g0["params"][0] is a and g1["nesterov"] is False
    assert opt.defaults["lr"] == 0.1
    a.grad = ember.ones(2, dtype=ember.float64)
    b.grad = ember.ones(2, dtype=ember.float64)
    opt.step()
    assert a.tolist() == [0.9, 0.9] and b.tolist() == [0.5, 0.5]
    g0["lr"] = 1.0  # what a Python scheduler does: the next step uses it
    opt.step()
    assert a.tolist() == pytest.approx([-0.1, -0.1])
    adam = ember.optim.Adam([a], betas=(0.5, 0.6))
    assert adam.param_groups[0]["betas"] == (0.5, 0.6)
    adam.param_groups[0]["betas"] = (0.7, 0.8)
    assert adam.param_groups[0]["betas"] == (0.7, 0.8)
    with pytest.raises(ember.ValueError, match="already in another group"):
        opt.add_param_group({"params": [a]})
    c = nn.Parameter(ember.ones(1))
    opt.add_param_group({"params": [c], "momentum": 0.9})
    assert opt.param_groups[2]["momentum"] == 0.9 and opt.param_groups[2]["lr"] == 0.1


def test_zero_grad():
    p = nn.Parameter(ember.ones(3))
    opt = ember.optim.SGD([p], lr=0.1)
    p.grad = ember.ones(3)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_round_trip_resumes_the_same_steps():
    full, _, _ = run(ember.optim.Adam, steps=3, lr=0.01, weight_decay=0.1)
    first, opt, p = run(ember.optim.Adam, steps=2, lr=0.01, weight_decay=0.1)
    sd = opt.state_dict()
    assert sd["param_groups"][0]["betas"] == (0.9, 0.999) and sd["param_groups"][0]["params"] == [0]
    assert sorted(sd["state"][0]) == ["exp_avg", "exp_avg_sq", "step"]
    # A new optimizer over a copy of the parameter continues exactly.
    q = nn.Parameter(p.detach().clone())
    opt2 = ember.optim.Adam([q], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.01
    q.grad = ember.tensor(GRADS[2], dtype=ember.float64)
    opt2.step()
    np.testing.assert_allclose(to_numpy(q), full[2], rtol=1e-12)
    with pytest.raises(ember.ValueError):
        ember.optim.SGD([nn.Parameter(ember.ones(5, dtype=ember.float64))], lr=0.1).load_state_dict(sd)


def test_unsupported_arguments_are_refused():
    p = nn.Parameter(ember.ones(1))
    with pytest.raises(NotImplementedError, match="maximize"):
        ember.optim.SGD([p], lr=0.1, maximize=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        ember.optim.SGD([], lr=0.1)
    with pytest.raises(ember.ValueError):
        ember.optim.SGD([p], lr=-1.0)


def test_clip_grad_norm_and_value():
    a = nn.Parameter(ember.zeros(2))
    b = nn.Parameter(ember.zeros(3))
    a.grad = ember.tensor([3.0, 4.0])
    b.grad = ember.tensor([0.0, 0.0, 12.0])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=6.5)
    assert total.item() == pytest.approx(13.0)
    scale = 6.5 / (13.0 + 1e-6)
    np.testing.assert_allclose(to_numpy(a.grad), [3 * scale, 4 * scale], rtol=1e-6)
    assert nn.utils.clip_grad_norm_([a, b], max_norm=100.0).item() == pytest.approx(6.5, rel=1e-5)
    inf_norm = nn.utils.clip_grad_norm_([a, b], max_norm=1e9, norm_type=float("inf"))
    assert inf_norm.item() == pytest.approx(12 * scale, rel=1e-5)
    nn.utils.clip_grad_value_([a, b], 1.0)
    assert b.grad.tolist() == [0.0, 0.0, 1.0]
    b.grad = ember.tensor([float("nan"), 0.0, 0.0])
    with pytest.raises(ember.ValueError):
        nn.utils.clip_grad_norm_([a, b], 1.0, error_if_nonfinite=True)
