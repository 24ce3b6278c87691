"""The functional ops and layers composed in Python (nn/functional.py, nn/composed_layers.py, the
parameter containers): values against float64 NumPy references written per element, gradients by
gradcheck, state dicts and modes, errors; and against PyTorch where it is installed."""

import math

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from conftest import assert_close, to_numpy


def t64(a, requires_grad=False):
    return ember.tensor(np.asarray(a, dtype=np.float64), dtype=ember.float64, requires_grad=requires_grad)


# ---- activations


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

ACTIVATIONS = {
    "elu": (lambda x: F.elu(x, 0.7), lambda v: v if v > 0 else 0.7 * math.expm1(v)),
    "selu": (F.selu, lambda v: SELU_SCALE * (v if v > 0 else SELU_ALPHA * math.expm1(v))),
    "celu": (lambda x: F.celu(x, 2.0), lambda v: max(0.0, v) + min(0.0, 2.0 * math.expm1(v / 2.0))),
    "hardsigmoid": (F.hardsigmoid, lambda v: min(max(v / 6 + 0.5, 0.0), 1.0)),
    "hardswish": (F.hardswish, lambda v: v * min(max(v + 3, 0.0), 6.0) / 6),
    "mish": (F.mish, lambda v: v * math.tanh(math.log1p(math.exp(v)))),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_against_their_formulas(name, rng):
    op, formula = ACTIVATIONS[name]
    x = np.concatenate([rng.normal(0, 3, 200), [-5.0, -3.0, -0.0, 0.0, 3.0, 5.0, 30.0, -30.0]])
    expected = [formula(v) for v in x]
    assert_close(op(t64(x)), expected)
    assert_close(op(ember.tensor(x.astype(np.float32))), expected, rtol=2e-6, atol=2e-6)
    # gradients away from the kinks (where the one-sided derivatives differ)
    smooth = x[(np.abs(x) > 1e-3) & (np.abs(np.abs(x) - 3) > 1e-3)][:40]
    assert ember.autograd.gradcheck(op, (t64(smooth, True),))


def test_elu_gradient_is_finite_for_large_inputs():
    x = ember.tensor([200.0, -200.0, 1.0], requires_grad=True)
    F.elu(x).sum().backward()
    assert np.isfinite(to_numpy(x.grad)).all() and to_numpy(x.grad)[0] == 1


def test_glu_prelu_and_their_modules(rng):
    a = rng.normal(size=(3, 8))
    x = t64(a, True)
    expected = a[:, :4] / (1 + np.exp(-a[:, 4:]))
    assert_close(F.glu(x), expected)
    assert_close(nn.GLU(dim=1)(x), expected)
    assert ember.autograd.gradcheck(F.glu, (x,))
    with pytest.raises(ValueError, match="even size"):
        F.glu(t64(np.ones((2, 3))))

    img = rng.normal(size=(2, 3, 4, 4))
    w = np.array([0.1, 0.2, 0.3])
    assert_close(F.prelu(t64(img), t64(w)), np.where(img >= 0, img, img * w.reshape(3, 1, 1)))
    layer = nn.PReLU(3, init=0.5)
    assert layer.weight.shape == (3,) and list(layer.state_dict()) == ["weight"]
    y = layer(ember.tensor(img.astype(np.float32)))
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(layer.weight.grad), np.minimum(img, 0).sum(axis=(0, 2, 3)), rtol=1e-5)
    with pytest.raises(ValueError, match="1 or 3"):
        F.prelu(t64(img), t64(np.ones(2)))


def test_activation_modules_match_the_functional_ops(rng):
    x = t64(rng.normal(0, 3, 50))
    pairs = [(nn.ELU(0.5), F.elu(x, 0.5)), (nn.SELU(), F.selu(x)), (nn.CELU(1.5), F.celu(x, 1.5)),
             (nn.Hardsigmoid(), F.hardsigmoid(x)), (nn.Hardswish(), F.hardswish(x)), (nn.Mish(), F.mish(x)),
             (nn.Softplus(2.0, 10.0), F.softplus(x, 2.0, 10.0)), (nn.ReLU6(), F.relu6(x)),
             (nn.Hardtanh(-2, 2), F.hardtanh(x, -2, 2)), (nn.LogSigmoid(), F.logsigmoid(x))]
    for module, expected in pairs:
        assert_close(module(x), to_numpy(expected))
    assert "alpha=0.5" in repr(nn.ELU(0.5))
    with pytest.raises(ValueError, match="min_val 3"):
        nn.Hardtanh(3, 1)


# ---- losses


def test_huber_and_kl_div_and_their_modules(rng):
    a, b = rng.normal(size=(4, 5)), rng.normal(size=(4, 5)) * 2
    d = np.abs(a - b)
    huber = np.where(d < 1.5, 0.5 * d * d, 1.5 * (d - 0.75))
    assert_close(F.huber_loss(t64(a), t64(b), delta=1.5), huber.mean())
    assert_close(nn.HuberLoss(reduction="sum", delta=1.5)(t64(a), t64(b)), huber.sum())
    assert_close(nn.SmoothL1Loss(beta=1.5)(t64(a), t64(b)), (huber / 1.5).mean())  # smooth L1 = huber / beta
    assert ember.autograd.gradcheck(lambda x: F.huber_loss(x, t64(b), delta=1.5), (t64(a, True),))
    with pytest.raises(ValueError, match="delta must be positive"):
        F.huber_loss(t64(a), t64(b), delta=0)

    logits = rng.normal(size=(4, 5))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    q = rng.random((4, 5))
    q[0, 1] = 0  # 0 log 0 counts as 0
    q /= q.sum(1, keepdims=True)
    pointwise = np.where(q > 0, q * (np.log(np.where(q > 0, q, 1)) - logp), 0)
    assert_close(F.kl_div(t64(logp), t64(q), reduction="batchmean"), pointwise.sum() / 4)
    assert_close(F.kl_div(t64(logp), t64(q)), pointwise.mean())
    assert_close(nn.KLDivLoss(reduction="sum")(t64(logp), t64(q)), pointwise.sum())
    log_q = np.log(np.where(q > 0, q, 1e-30))
    assert_close(F.kl_div(t64(logp), t64(log_q), reduction="none", log_target=True),
                 np.exp(log_q) * (log_q - logp), atol=1e-12)
    x = t64(logp, True)
    F.kl_div(x, t64(q), reduction="sum").backward()
    assert_close(x.grad, -q)


def test_binary_losses_as_modules(rng):
    logits, target = rng.normal(size=(3, 4)), (rng.random((3, 4)) > 0.5).astype(np.float64)
    p = 1 / (1 + np.exp(-logits))
    bce = -(target * np.log(p) + (1 - target) * np.log(1 - p))
    assert_close(nn.BCEWithLogitsLoss()(t64(logits), t64(target)), bce.mean(), rtol=1e-10)
    assert_close(nn.BCELoss(reduction="sum")(t64(p), t64(target)), bce.sum(), rtol=1e-10)
    pos = np.array([1.0, 2.0, 3.0, 4.0])
    weighted = -(pos * target * np.log(p) + (1 - target) * np.log(1 - p))
    loss = nn.BCEWithLogitsLoss(pos_weight=t64(pos))
    assert_close(loss(t64(logits), t64(target)), weighted.mean(), rtol=1e-10)
    assert "pos_weight" in loss.state_dict()


# ---- normalisation and dropout


def test_group_norm_against_numpy_and_gradcheck(rng):
    a = rng.normal(2, 3, size=(2, 6, 3, 3))
    w, b = rng.normal(size=6), rng.normal(size=6)
    g = a.reshape(2, 3, -1)
    expected = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(a.shape)
    expected = expected * w.reshape(6, 1, 1) + b.reshape(6, 1, 1)
    assert_close(F.group_norm(t64(a), 3, t64(w), t64(b)), expected, rtol=1e-10, atol=1e-10)
    layer = nn.GroupNorm(3, 6)
    assert sorted(layer.state_dict()) == ["bias", "weight"]
    assert_close(layer(ember.tensor(a.astype(np.float32))), (expected - b.reshape(6, 1, 1)) / w.reshape(6, 1, 1),
                 rtol=1e-4, atol=1e-4)
    small = t64(a[:1, :, :2, :2], True)
    assert ember.autograd.gradcheck(lambda x: F.group_norm(x, 2, t64(w), t64(b)), (small,))
    with pytest.raises(ValueError, match="6 channels cannot be split into 4 groups"):
        F.group_norm(t64(a), 4)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match=r"\(N, 6, ...\)"):
        layer(ember.ones(2, 5, 3))


def test_batch_norm_1d_trains_its_running_statistics(rng):
    a = rng.normal(1, 2, size=(16, 3))
    layer = nn.BatchNorm1d(3, momentum=0.5).double()
    y = layer(t64(a))
    assert_close(y, (a - a.mean(0)) / np.sqrt(a.var(0) + 1e-5), rtol=1e-10, atol=1e-10)
    assert_close(layer.running_mean, 0.5 * a.mean(0), rtol=1e-10)
    assert_close(layer.running_var, 0.5 + 0.5 * a.var(0, ddof=1), rtol=1e-10)  # the unbiased variance
    assert layer.num_batches_tracked.item() == 1
    layer.eval()
    assert_close(layer(t64(a)), (a - 0.5 * a.mean(0)) / np.sqrt(0.5 + 0.5 * a.var(0, ddof=1) + 1e-5), rtol=1e-10)
    assert layer.num_batches_tracked.item() == 1
    seq = rng.normal(size=(4, 3, 5))
    m = seq.transpose(1, 0, 2).reshape(3, -1)
    expected = (seq - m.mean(1).reshape(1, 3, 1)) / np.sqrt(m.var(1).reshape(1, 3, 1) + 1e-5)
    assert_close(nn.BatchNorm1d(3, track_running_stats=False).double()(t64(seq)), expected, rtol=1e-10, atol=1e-10)
    assert sorted(nn.BatchNorm1d(3).state_dict()) == ["bias", "num_batches_tracked", "running_mean", "running_var",
                                                       "weight"]
    with pytest.raises(ValueError, match=r"\(N, 3\) or \(N, 3, L\)"):
        layer(ember.ones(2, 4))


def test_dropout2d_drops_whole_channels():
    x = ember.ones(8, 16, 3, 3)
    y = to_numpy(F.dropout2d(x, 0.5))
    per_channel = y.reshape(8, 16, 9)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(2) == per_channel.max(2)).all()  # a channel is kept or dropped whole
    dropped = (per_channel[:, :, 0] == 0).mean()
    assert 0.3 < dropped < 0.7  # 128 channels at p = 0.5: outside this range once in ~10^4 runs
    layer = nn.Dropout2d(0.5)
    layer.eval()
    assert layer(x) is x
    assert F.dropout2d(x, 0.0) is x and to_numpy(F.dropout2d(x, 1.0)).max() == 0
    with pytest.raises(ValueError, match="p must be in"):
        F.dropout2d(x, 1.5)
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        F.dropout2d(ember.ones(4, 4), 0.5)


# ---- resampling and reshaping


def nearest_reference(a, out_h, out_w, scale_h, scale_w):
    n, c, h, w = a.shape
    rows = [min(int(math.floor(i * scale_h)), h - 1) for i in range(out_h)]
    cols = [min(int(math.floor(j * scale_w)), w - 1) for j in range(out_w)]
    return a[:, :, rows][:, :, :, cols]


def bilinear_reference(a, out_h, out_w, align_corners):
    n, c, h, w = a.shape

    def source(i, out, size):
        if align_corners:
            return i * (size - 1) / (out - 1) if out > 1 else 0.0
        return max((i + 0.5) * size / out - 0.5, 0.0)

    out = np.zeros((n, c, out_h, out_w))
    for i in range(out_h):
        y = source(i, out_h, h)
        y0 = min(int(y), h - 1)
        y1, ly = min(y0 + 1, h - 1), y - y0
        for j in range(out_w):
            x = source(j, out_w, w)
            x0 = min(int(x), w - 1)
            x1, lx = min(x0 + 1, w - 1), x - x0
            out[:, :, i, j] = ((1 - ly) * ((1 - lx) * a[:, :, y0, x0] + lx * a[:, :, y0, x1])
                               + ly * ((1 - lx) * a[:, :, y1, x0] + lx * a[:, :, y1, x1]))
    return out


@pytest.mark.parametrize("size", [(7, 3), (2, 9), (5, 5), (1, 1)])
def test_interpolate_by_size(size, rng):
    a = rng.normal(size=(2, 3, 5, 4))
    x = t64(a)
    h, w = size
    assert_close(F.interpolate(x, size=size), nearest_reference(a, h, w, 5 / h, 4 / w))
    for align in (False, True):
        assert_close(F.interpolate(x, size=size, mode="bilinear", align_corners=align),
                     bilinear_reference(a, h, w, align), rtol=1e-12, atol=1e-12)


def test_interpolate_by_scale_factor_linear_and_gradients(rng):
    a = rng.normal(size=(1, 2, 3, 4))
    x = t64(a, True)
    assert_close(F.interpolate(x, scale_factor=2), a.repeat(2, axis=2).repeat(2, axis=3))
    assert_close(nn.Upsample(scale_factor=2, mode="bilinear")(x), bilinear_reference(a, 6, 8, False), rtol=1e-12)
    assert F.interpolate(x, scale_factor=(1.5, 0.5)).shape == (1, 2, 4, 2)
    assert ember.autograd.gradcheck(lambda t: F.interpolate(t, size=(5, 3), mode="bilinear"), (x,))
    line = rng.normal(size=(2, 3, 4))
    got = F.interpolate(t64(line), size=7, mode="linear", align_corners=True)
    assert_close(got, bilinear_reference(line[:, :, None, :], 1, 7, True)[:, :, 0, :], rtol=1e-12)
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.interpolate(x, size=2, mode="bicubic")
    with pytest.raises(ValueError, match="align_corners applies to the linear modes"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(ValueError, match="must be positive"):
        F.interpolate(x, scale_factor=0)


def test_pixel_shuffle_round_trip_and_layout(rng):
    a = rng.normal(size=(2, 8, 3, 5))
    y = F.pixel_shuffle(t64(a), 2)
    assert y.shape == (2, 2, 6, 10)
    ya = to_numpy(y)
    # output (n, c, h*r + i, w*r + j) comes from channel c*r^2 + i*r + j at (h, w)
    assert ya[1, 1, 2 * 2 + 1, 3 * 2 + 0] == a[1, 1 * 4 + 1 * 2 + 0, 2, 3]
    assert_close(F.pixel_unshuffle(y, 2), a)
    assert_close(nn.PixelUnshuffle(2)(nn.PixelShuffle(2)(t64(a))), a)
    with pytest.raises(ValueError, match="pixel_shuffle"):
        F.pixel_shuffle(t64(a), 3)


def test_unflatten_cosine_similarity_pairwise_distance(rng):
    x = ember.arange(24).reshape(2, 12)
    assert nn.Unflatten(1, (3, -1))(x).shape == (2, 3, 4)
    assert nn.Unflatten(-1, (2, 6))(x).shape == (2, 2, 6)
    with pytest.raises(IndexError, match="dim 2 out of range"):
        nn.Unflatten(2, (3, 4))(x)
    a, b = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert_close(F.cosine_similarity(t64(a), t64(b)), cos, rtol=1e-12)
    assert_close(nn.CosineSimilarity(dim=1)(t64(a), t64(b)), cos, rtol=1e-12)
    assert to_numpy(F.cosine_similarity(ember.zeros(2, 3), ember.ones(2, 3))).tolist() == [0.0, 0.0]
    assert_close(F.pairwise_distance(t64(a), t64(b)), np.linalg.norm(a - b + 1e-6, axis=1), rtol=1e-12)
    assert nn.PairwiseDistance(keepdim=True)(t64(a), t64(b)).shape == (4, 1)


# ---- parameter containers


def test_parameter_list_and_dict_register_their_parameters():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = nn.ParameterList([ember.ones(2), nn.Parameter(ember.zeros(3))])
            self.table = nn.ParameterDict({"a": ember.ones(1)})

    net = Net()
    net.scales.append(ember.full((4,), 2.0))
    net.table["b"] = nn.Parameter(ember.ones(5))
    assert sorted(net.state_dict()) == ["scales.0", "scales.1", "scales.2", "table.a", "table.b"]
    assert len(list(net.parameters())) == 5 and all(p.requires_grad for p in net.parameters())
    assert isinstance(net.scales[0], nn.Parameter) and net.scales[-1].shape == (4,)
    assert [p.shape for p in net.scales[1:]] == [(3,), (4,)]
    assert "a" in net.table and list(net.table.keys()) == ["a", "b"] and len(net.table) == 2
    del net.table["a"]
    assert list(net.table) == ["b"]
    net.double()
    assert net.scales[0].dtype is ember.float64 and net.table["b"].dtype is ember.float64
    with pytest.raises(TypeError, match="ParameterList: expects tensors or Parameters, got str"):
        net.scales.append("x")
    with pytest.raises(IndexError, match="out of range"):
        net.scales[5]
    with pytest.raises(TypeError, match="ParameterDict"):
        net.table["c"] = 3.0


# ---- against PyTorch, where installed


def test_against_pytorch(rng):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    a = rng.normal(size=(2, 3, 5, 7))
    x, tx = t64(a), torch.tensor(a)
    cases = [
        (F.interpolate(x, size=(3, 11)), tf.interpolate(tx, size=(3, 11))),
        (F.interpolate(x, scale_factor=1.7), tf.interpolate(tx, scale_factor=1.7)),
        (F.interpolate(x, scale_factor=0.6, mode="bilinear"), tf.interpolate(tx, scale_factor=0.6, mode="bilinear")),
        (F.interpolate(x, size=(9, 4), mode="bilinear", align_corners=True),
         tf.interpolate(tx, size=(9, 4), mode="bilinear", align_corners=True)),
        (F.group_norm(x, 3), tf.group_norm(tx, 3)),
        (F.selu(x), tf.selu(tx)), (F.mish(x), tf.mish(tx)), (F.hardswish(x), tf.hardswish(tx)),
        (F.celu(x, 0.5), tf.celu(tx, 0.5)), (F.glu(x, 0), tf.glu(tx, 0)),
        (F.pixel_unshuffle(F.pixel_shuffle(t64(a[:, :, :4, :4].repeat(4, axis=1)), 2), 2),
         tf.pixel_unshuffle(tf.pixel_shuffle(torch.tensor(a[:, :, :4, :4].repeat(4, axis=1)), 2), 2)),
        (F.cosine_similarity(x, x * 2 + 1, dim=3), tf.cosine_similarity(tx, tx * 2 + 1, dim=3)),
        (F.kl_div(x, x.exp(), reduction="batchmean"), tf.kl_div(tx, tx.exp(), reduction="batchmean")),
        (F.huber_loss(x, x * 3, delta=0.7), tf.huber_loss(tx, tx * 3, delta=0.7)),
    ]
    for got, expected in cases:
        assert_close(got, expected.numpy(), rtol=1e-10, atol=1e-10)
    # A transposed conv layer loaded from PyTorch's: output and every gradient.
    torch.manual_seed(0)
    reference = torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1, dilation=1).double()
    layer = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1).double()
    layer.load_state_dict({k: t64(v.detach().numpy()) for k, v in reference.state_dict().items()})
    x, tx = t64(a, True), torch.tensor(a, requires_grad=True)
    y, ty = layer(x), reference(tx)
    assert_close(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    for got, expected in ((x.grad, tx.grad), (layer.weight.grad, reference.weight.grad), (layer.bias.grad, reference.bias.grad)):
        assert_close(got, expected.numpy(), rtol=1e-10, atol=1e-10)


# ---- 1-D convolution and pooling, attention dropout, the transformer encoder


def test_conv1d_and_1d_pooling_against_numpy(rng):
    x, w, b = rng.normal(size=(2, 4, 9)), rng.normal(size=(6, 2, 3)), rng.normal(size=6)
    out = F.conv1d(t64(x), t64(w), t64(b), stride=2, padding=1, groups=2)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    expected = np.zeros((2, 6, 5))
    for o in range(6):
        g = o // 3  # groups of 2 input and 3 output channels
        for i in range(5):
            expected[:, o, i] = (padded[:, 2 * g:2 * g + 2, 2 * i:2 * i + 3] * w[o]).sum(axis=(1, 2)) + b[o]
    assert_close(out, expected, rtol=1e-12, atol=1e-12)
    assert F.conv1d(t64(x[0]), t64(w), groups=2).shape == (6, 7)  # no batch dim
    assert F.conv1d(t64(x), t64(w), padding="same", groups=2).shape == (2, 6, 9)
    assert_close(F.max_pool1d(t64(x), 3), np.stack([x[..., 3 * i:3 * i + 3].max(-1) for i in range(3)], -1))
    values, indices = F.max_pool1d(t64(x), 2, stride=2, return_indices=True)
    assert (to_numpy(indices) == np.stack([2 * i + x[..., 2 * i:2 * i + 2].argmax(-1) for i in range(4)], -1)).all()
    assert_close(nn.AvgPool1d(3, stride=3)(t64(x)), np.stack([x[..., 3 * i:3 * i + 3].mean(-1) for i in range(3)], -1))
    assert_close(nn.AdaptiveAvgPool1d(1)(t64(x)), x.mean(-1, keepdims=True))
    layer = nn.Conv1d(4, 6, 3, padding=1, groups=2).double()
    assert layer.weight.shape == (6, 2, 3) and sorted(layer.state_dict()) == ["bias", "weight"]
    assert ember.autograd.gradcheck(lambda a, k: F.conv1d(a, k, stride=2), (t64(x[:1, :2, :5], True), t64(w[:2, :2], True)))
    with pytest.raises(ValueError, match=r"expects \(N, C, L\) or \(C, L\)"):
        F.conv1d(t64(np.ones((1, 1, 1, 4))), t64(w))
    with pytest.raises(ValueError, match="1-tuple"):
        F.max_pool1d(t64(x), (2, 2))


def transposed_conv_reference(x, w, b, stride, padding, output_padding, groups, dilation):
    """PyTorch's ConvTranspose2d definition, scattered per input element: each x[n, c, i, j] adds
    x * w[c, o] at (i * stride - padding + ki * dilation, j * ... ) of output channel group(c) * O/g + o."""
    n, c_in, h, wd = x.shape
    og, kh, kw = w.shape[1:]
    out_h = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    out_w = (wd - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    out = np.zeros((n, og * groups, out_h, out_w)) + (0 if b is None else b[None, :, None, None])
    for c in range(c_in):
        group = c // (c_in // groups)
        for i in range(h):
            for j in range(wd):
                for ki in range(kh):
                    for kj in range(kw):
                        oh, ow = i * stride[0] - padding[0] + ki * dilation[0], j * stride[1] - padding[1] + kj * dilation[1]
                        if 0 <= oh < out_h and 0 <= ow < out_w:
                            out[:, group * og:(group + 1) * og, oh, ow] += x[:, c, i, j, None] * w[c, :, ki, kj]
    return out


@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation", [
    ((1, 1), (0, 0), (0, 0), 1, (1, 1)),
    ((2, 3), (1, 0), (1, 2), 2, (1, 1)),
    ((1, 1), (1, 1), (1, 1), 1, (2, 2)),  # output_padding at or above the stride: allowed by the dilation
])
def test_conv_transpose2d_against_numpy(stride, padding, output_padding, groups, dilation, rng):
    x, w, b = rng.normal(size=(2, 4, 3, 4)), rng.normal(size=(4, 3, 3, 2)), rng.normal(size=3 * groups)
    expected = transposed_conv_reference(x, w, b, stride, padding, output_padding, groups, dilation)
    got = F.conv_transpose2d(t64(x), t64(w), t64(b), stride, padding, output_padding, groups, dilation)
    assert_close(got, expected, rtol=1e-12, atol=1e-12)
    assert_close(F.conv_transpose2d(t64(x).contiguous(memory_format=ember.channels_last), t64(w), t64(b), stride,
                                    padding, output_padding, groups, dilation), expected, rtol=1e-12, atol=1e-12)
    assert ember.autograd.gradcheck(
        lambda a, k: F.conv_transpose2d(a, k, None, stride, padding, output_padding, groups, dilation),
        (t64(x[:1], True), t64(w, True)))


def test_transposed_conv_layers(rng):
    layer = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2).double()
    assert layer.weight.shape == (4, 3, 3, 3) and sorted(layer.state_dict()) == ["bias", "weight"]
    assert (layer.kernel_size, layer.output_padding, layer.groups) == ((3, 3), (1, 1), 2)
    assert repr(layer) == ("ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
                           "output_padding=(1, 1), groups=2)")
    x = rng.normal(size=(2, 4, 5, 5))
    weight, bias = to_numpy(layer.weight), to_numpy(layer.bias)
    assert_close(layer(t64(x)), transposed_conv_reference(x, weight, bias, (2, 2), (1, 1), (1, 1), 2, (1, 1)),
                 rtol=1e-12, atol=1e-12)
    # output_size picks output_padding: 9 and 10 both come from a 5-wide input at stride 2.
    assert_close(layer(t64(x), output_size=(9, 10)),
                 transposed_conv_reference(x, weight, bias, (2, 2), (1, 1), (0, 1), 2, (1, 1)), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"output_size \(11, 10\) is not reachable .* must be in \[9, 10\]"):
        layer(t64(x), output_size=(11, 10))
    with pytest.raises(ValueError, match="output_padding must be non-negative and below the stride"):
        nn.ConvTranspose2d(4, 6, 3, output_padding=1)
    with pytest.raises(NotImplementedError, match="not square"):
        nn.ConvTranspose2d(4, 6, (3, 2))
    x1, w1 = rng.normal(size=(2, 4, 6)), rng.normal(size=(4, 2, 3))
    assert_close(F.conv_transpose1d(t64(x1), t64(w1), None, 2, 1, 1, 2),
                 transposed_conv_reference(x1[:, :, None], w1[:, :, None], None, (1, 2), (0, 1), (0, 1), 2, (1, 1))[:, :, 0],
                 rtol=1e-12, atol=1e-12)
    assert F.conv_transpose1d(t64(x1[0]), t64(w1), groups=2).shape == (4, 8)  # no batch dim
    layer1 = nn.ConvTranspose1d(4, 6, 3, stride=2, groups=2)
    assert layer1.weight.shape == (4, 3, 3) and layer1(ember.ones(1, 4, 5)).shape == (1, 6, 11)


def test_attention_dropout_acts_in_training_only():
    ember.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    assert mha.dropout == 0.5
    x = ember.randn(2, 5, 8)
    mha.eval()
    first = to_numpy(mha(x, x, x)[0])
    np.testing.assert_array_equal(to_numpy(mha(x, x, x)[0]), first)
    mha.train()
    dropped = to_numpy(mha(x, x, x)[0])
    assert not np.allclose(dropped, first)
    with pytest.raises(ember.ValueError, match="dropout must be in"):
        nn.MultiheadAttention(8, 2, dropout=1.5)


def test_transformer_encoder_layers_train_and_stack():
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True, norm_first=True,
                                       activation="gelu")
    names = sorted(layer.state_dict())
    assert names[:4] == ["linear1.bias", "linear1.weight", "linear2.bias", "linear2.weight"]
    assert "self_attn.in_proj_weight" in names and "norm2.weight" in names
    encoder = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(16))
    assert len(encoder.layers) == 3 and "layers.2.self_attn.out_proj.weight" in encoder.state_dict()
    # The copies are independent: a change to one layer's weight leaves the others and the original alone.
    with ember.no_grad():
        encoder.layers[0].linear1.weight.fill_(0.0)
    assert to_numpy(encoder.layers[1].linear1.weight).any() and to_numpy(layer.linear1.weight).any()
    x = ember.randn(2, 6, 16)
    target = ember.randn(2, 6, 16)
    opt = ember.optim.Adam(encoder.parameters(), lr=1e-2)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = F.mse_loss(encoder(x, is_causal=True), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    with pytest.raises(ValueError, match="activation must be"):
        nn.TransformerEncoderLayer(16, 4, activation="tanh")
    with pytest.raises(ValueError, match="num_layers"):
        nn.TransformerEncoder(layer, 0)


def test_against_pytorch_1d_and_transformer(rng):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x, w = rng.normal(size=(2, 4, 11)), rng.normal(size=(6, 4, 3))
    cases = [
        (F.conv1d(t64(x), t64(w), stride=2, padding=2, dilation=2), tf.conv1d(torch.tensor(x), torch.tensor(w), stride=2,
                                                                             padding=2, dilation=2)),
        (F.max_pool1d(t64(x), 3, 2, 1, ceil_mode=True), tf.max_pool1d(torch.tensor(x), 3, 2, 1, ceil_mode=True)),
        (F.avg_pool1d(t64(x), 4, 3, 2, count_include_pad=False),
         tf.avg_pool1d(torch.tensor(x), 4, 3, 2, count_include_pad=False)),
        (F.adaptive_avg_pool1d(t64(x), 4), tf.adaptive_avg_pool1d(torch.tensor(x), 4)),
        (F.conv_transpose1d(t64(x), t64(w.transpose(1, 0, 2)), None, 3, 1, 2, 1, 2),
         tf.conv_transpose1d(torch.tensor(x), torch.tensor(w.transpose(1, 0, 2)), None, 3, 1, 2, 1, 2)),
    ]
    for got, expected in cases:
        assert_close(got, expected.numpy(), rtol=1e-10, atol=1e-10)
    for norm_first in (False, True):
        torch.manual_seed(0)
        reference = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=24, dropout=0.0, batch_first=False,
                                                     norm_first=norm_first).double().eval()
        layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=24, dropout=0.0, batch_first=False,
                                           norm_first=norm_first).double().eval()
        layer.load_state_dict({k: t64(v.detach().numpy()) for k, v in reference.state_dict().items()})
        src = rng.normal(size=(5, 2, 16))
        pad = np.array([[False] * 5, [False, False, False, True, True]])
        causal = np.triu(np.ones((5, 5), dtype=bool), 1)
        got = layer(t64(src), src_mask=ember.tensor(causal), src_key_padding_mask=ember.tensor(pad))
        with torch.no_grad():
            expected = reference(torch.tensor(src), src_mask=torch.tensor(causal),
                                 src_key_padding_mask=torch.tensor(pad))
        assert_close(got, expected.numpy(), rtol=1e-9, atol=1e-9)
