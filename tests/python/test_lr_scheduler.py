"""ember.optim.lr_scheduler: each scheduler's lr sequence against its closed form (PyTorch's formulas)."""

import math

import pytest

import ember
import ember.nn as nn
from ember.optim import lr_scheduler as S

BASE = 0.1


def make_opt(kind="sgd", lr=BASE, groups=1):
    params = [nn.Parameter(ember.zeros(2)) for _ in range(groups)]
    if kind == "sgd":
        return ember.optim.SGD([{"params": [p]} for p in params], lr=lr, momentum=0.9)
    return ember.optim.Adam([{"params": [p]} for p in params], lr=lr)


def sequence(opt, sched, epochs):
    """The lr at epoch 0 (after construction) and after each of `epochs` steps, read from the group."""
    out = [opt.param_groups[0]["lr"]]
    for _ in range(epochs):
        opt.step()
        sched.step()
        out.append(opt.param_groups[0]["lr"])
        assert sched.get_last_lr()[0] == pytest.approx(out[-1], rel=1e-12)
    return out


def check(got, expected):
    assert len(got) == len(expected)
    for e, (g, x) in enumerate(zip(got, expected)):
        assert g == pytest.approx(x, rel=1e-12, abs=1e-15), f"epoch {e}: {g} != {x}"


def test_step_lr():
    opt = make_opt()
    check(sequence(opt, S.StepLR(opt, step_size=3, gamma=0.5), 10), [BASE * 0.5 ** (e // 3) for e in range(11)])


def test_multi_step_lr():
    opt = make_opt()
    milestones = [2, 5, 5, 8]  # a repeated milestone counts twice
    check(sequence(opt, S.MultiStepLR(opt, milestones, gamma=0.1), 10),
          [BASE * 0.1 ** sum(m <= e for m in milestones) for e in range(11)])


def test_cosine_annealing_lr():
    opt = make_opt()
    T, eta = 8, 0.001
    check(sequence(opt, S.CosineAnnealingLR(opt, T_max=T, eta_min=eta), T),
          [eta + (BASE - eta) * (1 + math.cos(math.pi * e / T)) / 2 for e in range(T + 1)])


def test_linear_lr_warmup():
    opt = make_opt()
    start, end, total = 0.25, 1.0, 4
    check(sequence(opt, S.LinearLR(opt, start_factor=start, end_factor=end, total_iters=total), 7),
          [BASE * (start + (end - start) * min(e, total) / total) for e in range(8)])


def one_cycle_ref(max_lr, total, pct_start=0.3, div=25.0, final_div=1e4, cos=True):
    initial = max_lr / div
    minimum = initial / final_div
    phases = [(pct_start * total - 1, initial, max_lr), (total - 1, max_lr, minimum)]

    def anneal(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) if cos else (b - a) * pct + a

    out = []
    for step in range(total):
        start_step = 0
        for i, (end_step, a, b) in enumerate(phases):
            if step <= end_step or i == len(phases) - 1:
                out.append(anneal(a, b, (step - start_step) / (end_step - start_step)))
                break
            start_step = end_step
    return out


@pytest.mark.parametrize("cos", [True, False])
def test_one_cycle_lr(cos):
    opt = make_opt()
    total = 20
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=total, anneal_strategy="cos" if cos else "linear")
    check(sequence(opt, sched, total - 1), one_cycle_ref(1.0, total, cos=cos))
    # Momentum moves against the lr: max_momentum at the start, base_momentum at the peak.
    opt2 = make_opt()
    S.OneCycleLR(opt2, max_lr=1.0, total_steps=total)
    assert opt2.param_groups[0]["momentum"] == pytest.approx(0.95)
    with pytest.raises(ember.ValueError):
        for _ in range(total + 1):
            sched.step()


def test_one_cycle_cycles_adam_beta1_and_takes_epochs():
    opt = make_opt("adam")
    sched = S.OneCycleLR(opt, max_lr=0.5, epochs=2, steps_per_epoch=5)
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.95)
    check(sequence(opt, sched, 9), one_cycle_ref(0.5, 10))


def test_sequential_lr():
    opt = make_opt()
    warm = S.LinearLR(opt, start_factor=0.1, total_iters=2)
    decay = S.StepLR(opt, step_size=2, gamma=0.5)
    sched = S.SequentialLR(opt, [warm, decay], milestones=[3])
    expected = [BASE * (0.1 + 0.9 * min(e, 2) / 2) for e in range(3)] + [BASE * 0.5 ** ((e - 3) // 2) for e in range(3, 10)]
    check(sequence(opt, sched, 9), expected)


def test_python_schedulers():
    opt = make_opt(groups=2)
    sched = S.LambdaLR(opt, [lambda e: 1 / (e + 1), lambda e: 0.5])
    seq = sequence(opt, sched, 4)
    check(seq, [BASE / (e + 1) for e in range(5)])
    assert opt.param_groups[1]["lr"] == pytest.approx(BASE * 0.5)
    opt = make_opt()
    check(sequence(opt, S.ExponentialLR(opt, gamma=0.9), 5), [BASE * 0.9**e for e in range(6)])
    opt = make_opt()
    check(sequence(opt, S.ConstantLR(opt, factor=0.5, total_iters=3), 5), [BASE * (0.5 if e < 3 else 1) for e in range(6)])


def test_scheduler_state_dict_round_trip():
    opt = make_opt()
    sched = S.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(3):
        sched.step()
    sd = sched.state_dict()
    assert sd["last_epoch"].item() == 3
    opt2 = make_opt()
    sched2 = S.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(sd)
    assert sched2.last_epoch == 3 and sched2.get_last_lr() == sched.get_last_lr()
    sched.step()
    sched2.step()
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"] == pytest.approx(BASE * 0.25)
