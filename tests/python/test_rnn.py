"""nn.RNN, LSTM, GRU and their cells: values against a NumPy float64 reference written here from the
formulas of PyTorch's documentation; outputs and gradients against PyTorch itself where it imports;
PyTorch's parameter names, attributes and results; a small model that learns; errors as Python
exceptions."""

import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
from conftest import to_numpy


def t64(a, requires_grad=False):
    return ember.tensor(np.asarray(a, dtype=np.float64), dtype=ember.float64, requires_grad=requires_grad)


# ---- the NumPy reference: sequence first (L, N, features), states (D*num_layers, N, size)


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def reference_step(mode, x, h, c, p):
    """One step on (N, features) rows; p holds weight_ih, weight_hh and maybe bias_ih, bias_hh, weight_hr."""
    gi = x @ p["weight_ih"].T + p.get("bias_ih", 0.0)
    gh = h @ p["weight_hh"].T + p.get("bias_hh", 0.0)
    if mode == "rnn_tanh":
        return np.tanh(gi + gh), None
    if mode == "rnn_relu":
        return np.maximum(gi + gh, 0.0), None
    if mode == "lstm":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        return (h @ p["weight_hr"].T if "weight_hr" in p else h), c
    ir, iz, in_ = np.split(gi, 3, axis=-1)
    hr, hz, hn = np.split(gh, 3, axis=-1)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * h, None


def reference_layers(mode, params, x, h0, c0, num_layers, directions):
    """(output, h_n, c_n) of the stack over x (L, N, H_in) from h0 and c0 (c_n None but for LSTM)."""
    h_n, c_n = [], []
    for k in range(num_layers):
        outs = []
        for d in range(directions):
            suffix = f"_l{k}" + ("_reverse" if d else "")
            p = {name[: -len(suffix)]: v for name, v in params.items() if name.endswith(suffix)}
            s = k * directions + d
            h, c = h0[s], (c0[s] if c0 is not None else None)
            out = [None] * len(x)
            for t in (range(len(x)) if d == 0 else reversed(range(len(x)))):
                h, c = reference_step(mode, x[t], h, c, p)
                out[t] = h
            outs.append(np.stack(out))
            h_n.append(h)
            c_n.append(c)
        x = np.concatenate(outs, axis=-1)
    return x, np.stack(h_n), (np.stack(c_n) if mode == "lstm" else None)


def make(mode, input_size, hidden_size, **kw):
    """An ember layer of `mode` in float64."""
    if mode.startswith("rnn"):
        return nn.RNN(input_size, hidden_size, nonlinearity=mode[4:], dtype=ember.float64, **kw)
    return (nn.LSTM if mode == "lstm" else nn.GRU)(input_size, hidden_size, dtype=ember.float64, **kw)


def call(layer, mode, x, h0, c0):
    """(output, h_n, c_n) of an ember layer, c_n None but for LSTM."""
    if mode == "lstm":
        out, (h, c) = layer(x, None if h0 is None else (h0, c0))
        return out, h, c
    out, h = layer(x, h0)
    return out, h, None


MODES = ["rnn_tanh", "rnn_relu", "lstm", "gru"]
L, N, I, H = 5, 3, 4, 6


def max_error(got, want):
    return float(np.max(np.abs(to_numpy(got) - want)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", ["sequence_first", "batch_first", "unbatched"])
@pytest.mark.parametrize("with_state", [False, True])
def test_against_numpy_reference(rng, mode, layout, with_state):
    layer = make(mode, I, H, num_layers=2, bidirectional=True, batch_first=layout == "batch_first")
    params = {k: to_numpy(v) for k, v in layer.state_dict().items()}
    n = 1 if layout == "unbatched" else N
    x = rng.uniform(-1, 1, size=(L, n, I))
    h0 = rng.uniform(-1, 1, size=(4, n, H)) if with_state else np.zeros((4, n, H))
    c0 = rng.uniform(-1, 1, size=(4, n, H)) if with_state else np.zeros((4, n, H))
    want_out, want_h, want_c = reference_layers(mode, params, x, h0, c0 if mode == "lstm" else None, 2, 2)

    if layout == "unbatched":
        x_in, h_in, c_in = x[:, 0], h0[:, 0], c0[:, 0]
        want_out, want_h, want_c = want_out[:, 0], want_h[:, 0], (None if want_c is None else want_c[:, 0])
    elif layout == "batch_first":
        x_in, h_in, c_in = x.transpose(1, 0, 2), h0, c0
        want_out = want_out.transpose(1, 0, 2)
    else:
        x_in, h_in, c_in = x, h0, c0
    out, h_n, c_n = call(layer, mode, t64(x_in), t64(h_in) if with_state else None,
                         t64(c_in) if with_state else None)
    assert tuple(out.shape) == want_out.shape and tuple(h_n.shape) == want_h.shape
    assert max_error(out, want_out) < 1e-12
    assert max_error(h_n, want_h) < 1e-12
    if mode == "lstm":
        assert max_error(c_n, want_c) < 1e-12
    else:
        assert c_n is None


def test_lstm_projections_against_numpy_reference(rng):
    layer = make("lstm", I, H, num_layers=2, bidirectional=True, proj_size=2)
    params = {k: to_numpy(v) for k, v in layer.state_dict().items()}
    assert params["weight_hr_l1_reverse"].shape == (2, H) and params["weight_ih_l1"].shape == (4 * H, 4)
    x, h0, c0 = rng.uniform(-1, 1, (L, N, I)), rng.uniform(-1, 1, (4, N, 2)), rng.uniform(-1, 1, (4, N, H))
    want_out, want_h, want_c = reference_layers("lstm", params, x, h0, c0, 2, 2)
    out, (h_n, c_n) = layer(t64(x), (t64(h0), t64(c0)))
    assert tuple(out.shape) == (L, N, 4) and tuple(h_n.shape) == (4, N, 2) and tuple(c_n.shape) == (4, N, H)
    assert max_error(out, want_out) < 1e-12 and max_error(h_n, want_h) < 1e-12 and max_error(c_n, want_c) < 1e-12


@pytest.mark.parametrize("mode", ["rnn_tanh", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_against_numpy_reference(rng, mode, batched):
    if mode.startswith("rnn"):
        cell = nn.RNNCell(I, H, nonlinearity=mode[4:], dtype=ember.float64)
    else:
        cell = (nn.LSTMCell if mode == "lstm" else nn.GRUCell)(I, H, dtype=ember.float64)
    p = {k: to_numpy(v) for k, v in cell.state_dict().items()}
    shape = (N,) if batched else ()
    x, h, c = rng.uniform(-1, 1, shape + (I,)), rng.uniform(-1, 1, shape + (H,)), rng.uniform(-1, 1, shape + (H,))
    want_h, want_c = reference_step(mode, x, h, c, p)
    if mode == "lstm":
        got_h, got_c = cell(t64(x), (t64(h), t64(c)))
        assert max_error(got_c, want_c) < 1e-12
    else:
        got_h = cell(t64(x), t64(h))
    assert tuple(got_h.shape) == shape + (H,)
    assert max_error(got_h, want_h) < 1e-12


# ---- against PyTorch


TORCH_CONFIGS = [
    dict(num_layers=2, bidirectional=True),
    dict(num_layers=2, batch_first=True),
    dict(num_layers=1, bidirectional=True, batch_first=True, bias=False),
]


def _torch_layer(torch, mode, **kw):
    if mode.startswith("rnn"):
        return torch.nn.RNN(I, H, nonlinearity=mode[4:], **kw).double()
    return (torch.nn.LSTM if mode == "lstm" else torch.nn.GRU)(I, H, **kw).double()


def _compare_with_torch(torch, mode, layer, reference, x, h0, c0, rng):
    """Loads reference's parameters into layer, runs both on the same inputs and cotangents, and returns
    the largest difference over the outputs and the gradients of inputs, states and parameters."""
    layer.load_state_dict({k: t64(v.detach().numpy()) for k, v in reference.state_dict().items()})
    ex, eh, ec = t64(x, True), t64(h0, True), t64(c0, True)
    tx, th, tc = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    if mode == "lstm":
        e_out, (e_h, e_c) = layer(ex, (eh, ec))
        t_out, (t_h, t_c) = reference(tx, (th, tc))
        pairs = [(e_out, t_out), (e_h, t_h), (e_c, t_c)]
    else:
        e_out, e_h = layer(ex, eh)
        t_out, t_h = reference(tx, th)
        pairs = [(e_out, t_out), (e_h, t_h)]
    weights = [rng.normal(size=tuple(t.shape)) for _, t in pairs]  # a loss that weighs every element differently
    sum(((e * t64(w)).sum() for (e, _), w in zip(pairs, weights)), t64(0.0)).backward()
    sum((t * torch.tensor(w)).sum() for (_, t), w in zip(pairs, weights)).backward()
    compared = [(e, t.detach()) for e, t in pairs] + [(ex.grad, tx.grad), (eh.grad, th.grad)]
    if mode == "lstm":
        compared.append((ec.grad, tc.grad))
    mine = dict(layer.named_parameters())
    theirs = dict(reference.named_parameters())
    assert sorted(mine) == sorted(theirs)
    compared += [(mine[name].grad, theirs[name].grad) for name in theirs]
    worst = 0.0
    for got, want in compared:
        assert tuple(got.shape) == tuple(want.shape)
        worst = max(worst, max_error(got, want.numpy()))
    return worst


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("config", range(len(TORCH_CONFIGS)))
def test_against_pytorch(rng, mode, config):
    torch = pytest.importorskip("torch")
    kw = TORCH_CONFIGS[config]
    torch.manual_seed(0)
    reference = _torch_layer(torch, mode, **kw)
    layer = make(mode, I, H, **kw)
    D = 2 if kw.get("bidirectional") else 1
    states = D * kw["num_layers"]
    x = rng.normal(size=(N, L, I) if kw.get("batch_first") else (L, N, I))
    h0, c0 = rng.normal(size=(states, N, H)), rng.normal(size=(states, N, H))
    assert _compare_with_torch(torch, mode, layer, reference, x, h0, c0, rng) < 1e-10


@pytest.mark.parametrize("mode", MODES)
def test_against_pytorch_unbatched(rng, mode):
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    reference = _torch_layer(torch, mode, num_layers=2, bidirectional=True)
    layer = make(mode, I, H, num_layers=2, bidirectional=True)
    x, h0, c0 = rng.normal(size=(L, I)), rng.normal(size=(4, H)), rng.normal(size=(4, H))
    assert _compare_with_torch(torch, mode, layer, reference, x, h0, c0, rng) < 1e-10


def test_against_pytorch_lstm_projections_and_zero_states(rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    reference = torch.nn.LSTM(I, H, num_layers=2, bidirectional=True, proj_size=3).double()
    layer = nn.LSTM(I, H, num_layers=2, bidirectional=True, proj_size=3, dtype=ember.float64)
    x, h0, c0 = rng.normal(size=(L, N, I)), rng.normal(size=(4, N, 3)), rng.normal(size=(4, N, H))
    assert _compare_with_torch(torch, "lstm", layer, reference, x, h0, c0, rng) < 1e-10
    # No states: both start from zeros.
    out, (h_n, c_n) = layer(t64(x))
    with torch.no_grad():
        t_out, (t_h, t_c) = reference(torch.tensor(x))
    assert max(max_error(out, t_out.numpy()), max_error(h_n, t_h.numpy()), max_error(c_n, t_c.numpy())) < 1e-10


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_against_pytorch(rng, name, batched):
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    reference = getattr(torch.nn, name)(I, H).double()
    cell = getattr(nn, name)(I, H, dtype=ember.float64)
    cell.load_state_dict({k: t64(v.detach().numpy()) for k, v in reference.state_dict().items()})
    shape = (N,) if batched else ()
    x, h, c = rng.normal(size=shape + (I,)), rng.normal(size=shape + (H,)), rng.normal(size=shape + (H,))
    ex, eh, ec = t64(x, True), t64(h, True), t64(c, True)
    tx, th, tc = (torch.tensor(a, requires_grad=True) for a in (x, h, c))
    if name == "LSTMCell":
        mine, theirs = cell(ex, (eh, ec)), reference(tx, (th, tc))
    else:
        mine, theirs = (cell(ex, eh),), (reference(tx, th),)
    weights = [rng.normal(size=tuple(t.shape)) for t in theirs]
    sum(((e * t64(w)).sum() for e, w in zip(mine, weights)), t64(0.0)).backward()
    sum((t * torch.tensor(w)).sum() for t, w in zip(theirs, weights)).backward()
    compared = list(zip(mine, [t.detach() for t in theirs])) + [(ex.grad, tx.grad), (eh.grad, th.grad)]
    if name == "LSTMCell":
        compared.append((ec.grad, tc.grad))
    mine_params = dict(cell.named_parameters())
    compared += [(mine_params[k].grad, p.grad) for k, p in reference.named_parameters()]
    for got, want in compared:
        assert max_error(got, want.numpy()) < 1e-10


# ---- PyTorch's names, attributes and results


def test_names_attributes_and_repr():
    lstm = nn.LSTM(3, 5, 2, bidirectional=True, batch_first=True)
    # torch.nn.LSTM(3, 5, 2, bidirectional=True).state_dict().keys(), in order.
    assert list(lstm.state_dict()) == [
        f"{w}_l{k}{s}" for k in range(2) for s in ("", "_reverse") for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert (lstm.input_size, lstm.hidden_size, lstm.num_layers, lstm.bidirectional, lstm.batch_first,
            lstm.bias, lstm.dropout, lstm.proj_size) == (3, 5, 2, True, True, True, 0.0, 0)
    assert repr(lstm) == "LSTM(3, 5, num_layers=2, batch_first=True, bidirectional=True)"
    assert nn.RNN(3, 5, nonlinearity="relu").nonlinearity == "relu"
    assert list(nn.GRU(3, 5, bias=False).state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert list(nn.GRUCell(3, 5).state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert tuple(nn.LSTMCell(3, 5).weight_ih.shape) == (20, 3)
    assert repr(nn.RNNCell(3, 5, bias=False)) == "RNNCell(3, 5, bias=False)"
    lstm.flatten_parameters()  # PyTorch code calls it; nothing to do here
    copied = copy.deepcopy(lstm)
    assert isinstance(copied, nn.LSTM) and copied.bidirectional
    assert all(np.array_equal(to_numpy(a), to_numpy(b)) for a, b in zip(copied.parameters(), lstm.parameters()))
    assert nn.LSTM(3, 5, dtype=ember.float64).weight_ih_l0.dtype is ember.float64
    with pytest.warns(UserWarning, match="num_layers=1"):
        nn.GRU(3, 5, dropout=0.5)
    with pytest.raises(NotImplementedError, match="fixed at construction"):
        lstm.hidden_size = 7


def test_dropout_between_layers_only_while_training():
    x = ember.randn(6, 2, 3)
    plain = nn.LSTM(3, 8, 2)
    dropped = nn.LSTM(3, 8, 2, dropout=0.5)
    dropped.load_state_dict(plain.state_dict())
    want = to_numpy(plain(x)[0])
    assert not np.allclose(to_numpy(dropped(x)[0]), want)
    dropped.eval()
    assert np.array_equal(to_numpy(dropped(x)[0]), want)


def test_forward_hooks_see_input_and_output():
    gru = nn.GRU(3, 4)
    seen = []
    gru.register_forward_hook(lambda module, args, output: seen.append((tuple(args[0].shape), tuple(output.shape))))
    out, h_n = gru(ember.randn(5, 2, 3))
    assert seen == [((5, 2, 3), (5, 2, 4))]


# ---- learning


class _SequenceSum(nn.Module):
    """Reads a sequence with an LSTM and predicts a number from its last hidden state."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(1, 16, batch_first=True)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        _, (h_n, _) = self.rnn(x)
        return self.head(h_n[-1])


def test_a_small_sequence_model_learns(rng):
    # The target is the sum of the sequence: the LSTM must carry it across the steps.
    x = rng.uniform(-1, 1, size=(64, 6, 1)).astype(np.float32)
    y = x.sum(axis=1)
    xs, ys = ember.tensor(x), ember.tensor(y)
    model = _SequenceSum()
    opt = ember.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(60):
        loss = nn.functional.mse_loss(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses[::10]


# ---- errors


def test_errors_are_python_exceptions():
    with pytest.raises(ValueError, match="hidden_size=0"):
        nn.LSTM(4, 0)
    with pytest.raises(ValueError, match="'tanh' or 'relu'"):
        nn.RNN(4, 8, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout must be in"):
        nn.GRU(4, 8, num_layers=2, dropout=1.5)
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(4, 8, proj_size=8)
    with pytest.raises(ValueError, match="num_layers"):
        nn.RNN(4, 8, num_layers=0)
    with pytest.raises(TypeError):
        nn.LSTM(4.5, 8)
    lstm = nn.LSTM(4, 8, num_layers=2)
    with pytest.raises(ValueError, match=r"\(5, 3, 7\) has 7 features, expected input_size=4"):
        lstm(ember.zeros(5, 3, 7))
    with pytest.raises(ValueError, match=r"input must be \(L, N, H_in\)"):
        lstm(ember.zeros(2, 5, 3, 4))
    with pytest.raises(ValueError, match=r"h0 \(1, 3, 8\) must be \(2, 3, 8\)"):
        lstm(ember.zeros(5, 3, 4), (ember.zeros(1, 3, 8), ember.zeros(2, 3, 8)))
    with pytest.raises(ValueError, match="no steps"):
        lstm(ember.zeros(0, 3, 4))
    with pytest.raises(TypeError, match=r"hx must be a tuple \(h_0, c_0\)"):
        lstm(ember.zeros(5, 3, 4), ember.zeros(2, 3, 8))
    with pytest.raises(ValueError, match="h0 and c0 must be given together"):
        lstm(ember.zeros(5, 3, 4), (ember.zeros(2, 3, 8), None))
    with pytest.raises(ValueError, match=r"h0 \(2, 1, 8\) must be \(2, 8\)"):
        lstm(ember.zeros(5, 4), (ember.zeros(2, 1, 8), ember.zeros(2, 1, 8)))
    with pytest.raises(ValueError, match=r"hx \(3, 8\) must be \(2, 8\)"):
        nn.GRUCell(4, 8)(ember.zeros(2, 4), ember.zeros(3, 8))
    with pytest.raises(ValueError, match=r"input must be \(N, 4\) or \(4,\) unbatched, got \(2, 5\)"):
        nn.RNNCell(4, 8)(ember.zeros(2, 5))
    with pytest.raises(TypeError):
        nn.GRU(4, 8)("not a tensor")
