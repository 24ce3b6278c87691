"""ember.amp.TrainingPrecision: the seven precision modes by name over a built-in model and a Python
one: the dtypes each keeps, training that lowers the loss, the naive modes' float32 masters and dynamic
loss scale (an overflow skips the step and backs the scale off), gradient accumulation, the state dict,
and the errors."""

import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

# What each mode keeps: (conv weight, batch norm weight, the optimizer's parameters, the input).
F32, F16, BF16 = ember.float32, ember.float16, ember.bfloat16
KEEPS = {
    "fp32": (F32, F32, F32, F32),
    "tf32": (F32, F32, F32, F32),
    "amp_fp16": (F32, F32, F32, F32),
    "amp_bf16": (F32, F32, F32, F32),
    "naive_fp16": (F16, F32, F32, F16),
    "naive_bf16": (BF16, F32, F32, BF16),
    "pure_bf16": (BF16, BF16, BF16, BF16),
}


@pytest.fixture(autouse=True)
def tf32_off_after():
    yield
    ember.backends.cuda.matmul.allow_tf32 = ember.backends.cudnn.allow_tf32 = False


def batch(seed=0, n=16):
    gen = ember.Generator(seed)
    return ember.randn(n, 1, 28, 28, generator=gen), ember.randint(0, 10, (n,), generator=gen)


def train(precision, model, steps, x, y, clip=0.0):
    losses = []
    for _ in range(steps):
        precision.zero_grad()
        with precision.autocast("cpu"):
            loss = F.cross_entropy(model(x.to(precision.input_dtype)).float(), y)
        precision.backward_and_step(loss, clip)
        losses.append(loss.item())
    return losses


def test_the_modes_are_the_c_plus_plus_programs():
    assert ember.amp.precision_modes() == list(KEEPS)


@pytest.mark.parametrize("mode", list(KEEPS))
def test_each_mode_keeps_its_dtypes_and_learns(mode):
    ember.manual_seed(0)
    model = nn.models.SmallCNN(10, 1, 28)
    precision = ember.amp.TrainingPrecision(model, mode, ember.optim.SGD, lr=0.05, momentum=0.9)
    conv, bn, stepped, inputs = KEEPS[mode]
    assert precision.mode == mode and precision.input_dtype is inputs
    assert model.conv1.weight.dtype is conv and model.bn1.weight.dtype is bn
    assert {p.dtype for g in precision.optimizer.param_groups for p in g["params"]} == {stepped}
    assert precision.scales_loss == (mode in ("amp_fp16", "naive_fp16"))
    assert ember.backends.cuda.matmul.allow_tf32 == (mode == "tf32")
    x, y = batch()
    losses = train(precision, model, 8, x, y, clip=5.0)
    assert losses[-1] < 0.7 * losses[0], losses


def test_a_naive_fp16_overflow_skips_the_step_and_backs_the_scale_off():
    ember.manual_seed(0)
    model = nn.models.SmallCNN(10, 1, 28)
    precision = ember.amp.TrainingPrecision(model, "naive_fp16", ember.optim.SGD, lr=0.05,
                                            loss_scaler={"hysteresis": 1, "initial_scale_power": 10})
    assert precision.loss_scale().item() == 1024
    x, y = batch()
    masters = [p.clone() for p in precision.optimizer.param_groups[0]["params"]]
    weight = model.conv1.weight.clone()
    precision.zero_grad()
    loss = F.cross_entropy(model(x.half()).float(), y) * 1e30  # inf in float16 once scaled
    grad_norm, skipped = precision.backward_and_step(loss)
    assert skipped.item() == 1 and not grad_norm.isfinite_all()
    assert precision.loss_scale().item() == 512
    assert all(ember.equal(a, b) for a, b in zip(masters, precision.optimizer.param_groups[0]["params"]))
    assert ember.equal(model.conv1.weight, weight)
    losses = train(precision, model, 3, x, y)  # a clean step moves the model again
    assert not ember.equal(model.conv1.weight, weight) and losses[-1] < losses[0]


def test_accumulated_micro_batches_step_as_one_batch():
    x, y = batch(n=32)
    results = []
    for parts in (1, 2):
        ember.manual_seed(0)
        model = nn.models.SmallCNN(10, 1, 28)
        model.eval()  # batch norm by its running statistics: the halves see the same normalisation
        precision = ember.amp.TrainingPrecision(model, "fp32", ember.optim.SGD, lr=0.1)
        precision.zero_grad()
        for xs, ys in zip(x.chunk(parts), y.chunk(parts)):
            precision.backward(F.cross_entropy(model(xs), ys, reduction="sum") / 32)
        grad_norm, skipped = precision.step()
        results.append((model.fc2.weight.clone(), grad_norm.item(), skipped.item()))
    (w1, n1, s1), (w2, n2, s2) = results
    assert s1 == s2 == 0 and n1 == pytest.approx(n2, rel=1e-5)
    assert (w1 - w2).abs().max().item() < 1e-6


def test_a_python_module_trains_in_naive_bf16():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4 * 28 * 28, 10)

        def forward(self, x):
            return self.fc(self.bn(self.conv(x)).relu().flatten(1))

    ember.manual_seed(0)
    net = Net()
    precision = ember.amp.TrainingPrecision(net, "naive_bf16", ember.optim.Adam, lr=1e-3)
    assert net.conv.weight.dtype is BF16 and net.fc.weight.dtype is BF16 and net.bn.weight.dtype is F32
    x, y = batch()
    losses = train(precision, net, 6, x, y)
    assert losses[-1] < losses[0]


def test_state_dict_round_trip_and_its_checks():
    ember.manual_seed(0)
    model = nn.models.SmallCNN(10, 1, 28)
    precision = ember.amp.TrainingPrecision(model, "naive_fp16", ember.optim.SGD, lr=0.05)
    train(precision, model, 2, *batch())
    state = precision.state_dict()
    assert "loss_scaler.cur_scale" in state and any(k.startswith("master.") for k in state)
    ember.manual_seed(1)
    other_model = nn.models.SmallCNN(10, 1, 28)
    other = ember.amp.TrainingPrecision(other_model, "naive_fp16", ember.optim.SGD, lr=0.05)
    other.load_state_dict(state)
    assert all(ember.equal(state[k], v) for k, v in other.state_dict().items())
    amp = ember.amp.TrainingPrecision(nn.models.SmallCNN(10, 1, 28), "amp_fp16", ember.optim.SGD, lr=0.05)
    with pytest.raises(ValueError):
        amp.load_state_dict(state)


def test_errors_name_what_is_wrong():
    model = nn.models.SmallCNN(10, 1, 28)
    with pytest.raises(ValueError, match="unknown mode 'fp8'; the modes are fp32, tf32"):
        ember.amp.TrainingPrecision(model, "fp8", ember.optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match="loss_scaler: unknown option 'window'"):
        ember.amp.TrainingPrecision(model, "naive_fp16", ember.optim.SGD, lr=0.1, loss_scaler={"window": 10})
    with pytest.raises(TypeError, match="expected an ember.optim optimizer class"):
        ember.amp.TrainingPrecision(model, "fp32", object, lr=0.1)
    with pytest.raises(TypeError, match="grad_scaler: option 'init_scale' must be a number, got str"):
        ember.amp.TrainingPrecision(model, "amp_fp16", ember.optim.SGD, lr=0.1, grad_scaler={"init_scale": "big"})
    with pytest.raises(TypeError, match="loss_scaler: option 'hysteresis' must be a whole number, got float"):
        ember.amp.TrainingPrecision(model, "naive_fp16", ember.optim.SGD, lr=0.1, loss_scaler={"hysteresis": 1.5})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ember.backends.cuda.matmul.allow_tf32 = ember.backends.cudnn.allow_tf32 = False
    # Found after the model was cast (the optimizer and the scaler are built over the cast model): the
    # model gets its own float32 tensors back, and the TF32 switches their values.
    for mode, kwargs in [("naive_fp16", {"lr": -1.0}), ("pure_bf16", {"lr": -1.0}), ("tf32", {"lr": -1.0}),
                         ("naive_fp16", {"lr": 0.1, "loss_scaler": {"hysteresis": 0}})]:
        with pytest.raises(ValueError):
            ember.amp.TrainingPrecision(model, mode, ember.optim.SGD, **kwargs)
        assert not ember.backends.cuda.matmul.allow_tf32 and not ember.backends.cudnn.allow_tf32
        for name, t in model.state_dict().items():
            assert t.dtype is before[name].dtype and ember.equal(t, before[name]), (mode, name)
