"""ember.compile_step: a training step written in Python, warmed up, captured and replayed, equal to the
same steps run eagerly bit for bit (plain SGD and a naive_fp16 TrainingPrecision, whose overflowed step
is skipped in both), the counts of eager runs, captures and replays, learning rates read at each
replay, and what a capture refuses. On the CPU a replay runs the step again under the capture's rules;
test_cuda.py's case replays a CUDA graph."""

import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F


def data(steps, n=8, seed=5):
    gen = ember.Generator(seed)
    out = []
    for i in range(steps):
        x = ember.randn(n, 1, 28, 28, generator=gen)
        if i == 4:
            x = x * 1e30  # overflows float16: the naive mode skips this step
        out.append((x, ember.randint(0, 10, (n,), generator=gen)))
    return out


def same(a, b):
    """Equal element for element, NaN matching NaN (the overflowed step's loss and norm)."""
    return a.shape == b.shape and ((a == b) | (a.isnan() & b.isnan())).all().item()


def sgd_training(device="cpu"):
    ember.manual_seed(0)
    model = nn.models.SmallCNN(10, 1, 28).to(device)
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def naive_fp16_training():
    ember.manual_seed(0)
    model = nn.models.SmallCNN(10, 1, 28)
    precision = ember.amp.TrainingPrecision(model, "naive_fp16", ember.optim.SGD, lr=0.01, momentum=0.9)

    def step(x, y):
        precision.zero_grad()
        loss = F.cross_entropy(model(x.half()).float(), y)
        grad_norm, skipped = precision.backward_and_step(loss, 5.0)
        return loss, grad_norm, skipped

    return model, precision.optimizer, step


@pytest.mark.parametrize("training", [sgd_training, naive_fp16_training])
def test_replays_equal_the_eager_steps_bit_for_bit(training):
    batches = data(10)
    eager_model, eager_opt, eager_step = training()
    eager = []
    for i, (x, y) in enumerate(batches):
        out = eager_step(x, y)
        eager.append([t.clone() for t in (out if isinstance(out, tuple) else (out,))])
        eager_opt.param_groups[0]["lr"] *= 0.9  # a schedule: each replay reads the new rate
    model, opt, step = training()
    compiled = ember.compile_step(step, optimizers=[opt], warmup_steps=2)
    for i, (x, y) in enumerate(batches):
        out = compiled(x, y)
        out = out if isinstance(out, tuple) else (out,)
        assert all(same(a, b) for a, b in zip(out, eager[i])), f"step {i}"
        opt.param_groups[0]["lr"] *= 0.9
    assert compiled.stats == {"eager": 2, "captures": 1, "replays": 8}
    for (name, a), (_, b) in zip(model.state_dict().items(), eager_model.state_dict().items()):
        assert same(a, b), name
    if training is naive_fp16_training:
        assert eager[4][2].item() == 1.0  # the overflow was skipped, eagerly and replayed alike


def test_shapes_momentum_and_other_hyperparameters():
    model, opt, step = sgd_training()
    compiled = ember.compile_step(step, optimizers=[opt], warmup_steps=1, max_graphs=1)
    eight, five = data(1)[0], data(1, n=5)[0]
    compiled(*eight)  # warm-up
    compiled(*eight)  # capture and replay
    opt.param_groups[0]["momentum"] = 0.8  # read from memory: replayed
    compiled(*eight)
    assert compiled.stats == {"eager": 1, "captures": 1, "replays": 2}
    opt.param_groups[0]["weight_decay"] = 1e-4  # baked into the capture: captured again
    compiled(*eight)
    assert compiled.stats["captures"] == 2
    compiled(*five)  # another shape: warm-up, then eager for good (one graph at most)
    compiled(*five)
    assert compiled.stats == {"eager": 3, "captures": 2, "replays": 3}


def test_a_host_read_in_the_step_is_a_capture_error_naming_it():
    model, opt, _ = sgd_training()
    reads = []

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        reads.append(loss.item())  # fine eagerly; a capture cannot replay it
        return loss

    compiled = ember.compile_step(step, warmup_steps=1)
    x, y = data(1)[0]
    compiled(x, y)
    with pytest.raises(ember.CaptureError, match=r"item\(\)"):
        compiled(x, y)


def test_bad_arguments():
    _, opt, step = sgd_training()
    with pytest.raises(ValueError):
        ember.compile_step(step, optimizers=[opt], warmup_steps=0)
    with pytest.raises(TypeError, match="step must be callable"):
        ember.compile_step(42)
    with pytest.raises(TypeError, match="compile_step: expected an ember.optim optimizer, got list"):
        ember.compile_step(step, optimizers=[[1]])
    compiled = ember.compile_step(lambda x: (x * 2, "two"))
    with pytest.raises(TypeError, match="a tensor or a sequence of tensors"):
        compiled(ember.ones(2))
    with pytest.raises(ValueError):
        ember.compile_step(lambda: ember.ones(1))()  # an empty batch
