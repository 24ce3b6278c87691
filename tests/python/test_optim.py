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


def rmsprop_ref(lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    p, sq, avg, buf, out = P0.copy(), np.zeros(5), np.zeros(5), np.zeros(5), []
    for g in GRADS:
        g = g + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        denom = sq
        if centered:
            avg = alpha * avg + (1 - alpha) * g
            denom = sq - avg * avg
        update = g / (np.sqrt(denom) + eps)
        if momentum:
            buf = momentum * buf + update
            update = buf
        p = p - lr * update
        out.append(p.copy())
    return out


def adagrad_ref(lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    p, total, out = P0.copy(), np.full(5, initial_accumulator_value), []
    for t, g in enumerate(GRADS, start=1):
        g = g + weight_decay * p
        total = total + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(total) + eps)
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
    (ember.optim.RMSprop, dict(lr=0.01), rmsprop_ref(0.01)),
    (ember.optim.RMSprop, dict(lr=0.01, alpha=0.9, momentum=0.8, weight_decay=0.1),
     rmsprop_ref(0.01, alpha=0.9, momentum=0.8, weight_decay=0.1)),
    (ember.optim.RMSprop, dict(lr=0.02, centered=True, eps=1e-3), rmsprop_ref(0.02, centered=True, eps=1e-3)),
    (ember.optim.Adagrad, dict(lr=0.1), adagrad_ref(0.1)),
    (ember.optim.Adagrad, dict(lr=0.1, lr_decay=0.5, weight_decay=0.2, initial_accumulator_value=0.3),
     adagrad_ref(0.1, lr_decay=0.5, weight_decay=0.2, initial_accumulator_value=0.3)),
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


# ---- optimizers written in Python


class Lion(ember.optim.Optimizer):
    """Lion (Chen et al., 2023), as a user would write it: sign of an interpolated momentum."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @ember.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = ember.zeros_like(p)
                m = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_((m * b1 + p.grad * (1 - b1)).sign(), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


def lion_ref(lr, betas, weight_decay):
    p, m, out = P0.copy(), np.zeros(5), []
    for g in GRADS:
        p = p * (1 - lr * weight_decay) - lr * np.sign(betas[0] * m + (1 - betas[0]) * g)
        m = betas[1] * m + (1 - betas[1]) * g
        out.append(p.copy())
    return out


def test_an_optimizer_written_in_python_steps_and_shows_its_groups():
    got, opt, p = run(Lion, lr=0.1, betas=(0.8, 0.9), weight_decay=0.5)
    np.testing.assert_allclose(got, lion_ref(0.1, (0.8, 0.9), 0.5), rtol=1e-12, atol=1e-14)
    group = opt.param_groups[0]
    assert {k: group[k] for k in group if k != "params"} == dict(lr=0.1, betas=(0.8, 0.9), weight_decay=0.5)
    assert sorted(opt.state[p]) == ["exp_avg"] and len(opt.state) == 1
    opt.zero_grad()
    assert p.grad is None
    with pytest.raises(NotImplementedError, match="defines step"):
        ember.optim.Optimizer([p], dict(lr=0.1)).step()


def test_a_python_optimizer_follows_schedulers_and_resumes_from_its_state_dict():
    p = nn.Parameter(ember.tensor(P0, dtype=ember.float64))
    extra = nn.Parameter(ember.ones(2, dtype=ember.float64))
    opt = Lion([p], lr=0.2)
    opt.add_param_group({"params": [extra], "lr": 0.4, "tag": "head"})
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)  # one of ember's C++ schedulers
    for g in GRADS[:2]:
        p.grad = ember.tensor(g, dtype=ember.float64)
        extra.grad = ember.ones(2, dtype=ember.float64)
        opt.step()
        sched.step()
    assert [g["lr"] for g in opt.param_groups] == [0.05, 0.1]
    saved = opt.state_dict()
    assert saved["param_groups"][1]["params"] == [1] and saved["param_groups"][1]["tag"] == "head"
    assert sorted(saved["state"]) == [0, 1]

    q = nn.Parameter(p.detach().clone())
    q_extra = nn.Parameter(extra.detach().clone())
    resumed = Lion([q], lr=1.0)
    resumed.add_param_group({"params": [q_extra]})
    resumed.load_state_dict(ember.load(_round_trip(saved)))
    assert [g["lr"] for g in resumed.param_groups] == [0.05, 0.1] and resumed.param_groups[1]["tag"] == "head"
    for target, grads in ((p, opt), (q, resumed)):
        target.grad = ember.tensor(GRADS[2], dtype=ember.float64)
        grads.step()
    np.testing.assert_array_equal(to_numpy(q), to_numpy(p))
    with pytest.raises(ember.ValueError, match="1 param groups for an optimizer of 2"):
        resumed.load_state_dict({"state": {}, "param_groups": saved["param_groups"][:1]})


def _round_trip(state_dict):
    import io

    buffer = io.BytesIO()
    ember.save(state_dict, buffer)
    buffer.seek(0)
    return buffer


def test_grad_scaler_unscales_for_a_python_optimizer_and_skips_an_overflow():
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    opt = ember.optim.RMSprop([p], lr=0.1)
    scaler = ember.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale((p * p).sum()).backward()
    scaler.step(opt)
    scaler.update()
    expected = np.array([1.0, 2.0]) - 0.1 * np.array([2.0, 4.0]) / (np.sqrt(0.01 * np.array([4.0, 16.0])) + 1e-8)
    np.testing.assert_allclose(to_numpy(p), expected, rtol=1e-6, atol=1e-6)
    before = to_numpy(p)
    opt.zero_grad()
    scaler.scale(p.sum() * float("inf")).backward()
    scaler.step(opt)
    with pytest.raises(ember.StateError, match="already called"):
        scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(to_numpy(p), before)  # the overflow step changed nothing
    assert scaler.get_scale() == 512.0


def test_python_optimizers_check_their_arguments():
    p = nn.Parameter(ember.ones(2))
    with pytest.raises(ValueError, match="RMSprop: lr must be a non-negative number, got -1"):
        ember.optim.RMSprop([p], lr=-1)
    with pytest.raises(ValueError, match="Adagrad: eps"):
        ember.optim.Adagrad([p], eps=float("nan"))
    with pytest.raises(NotImplementedError, match="maximize"):
        ember.optim.Adagrad([p], maximize=True)
    with pytest.raises(TypeError, match="compile_step: Lion is written in Python"):
        ember.compile_step(lambda: p, optimizers=[Lion([p])])
