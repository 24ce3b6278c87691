"""ember.nn.Module subclassed in Python: registration by attribute assignment, state dicts, modes, moving,
hooks, and C++ layers as children (their tensors are the C++ layer's own)."""

import copy
import threading

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from conftest import to_numpy


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gain = nn.Parameter(ember.ones(8))

    def forward(self, x):
        return self.fc(x).relu() * self.gain


class Net(nn.Module):
    """Two Linear layers, a buffer and a submodule."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.block = Block()
        self.fc2 = nn.Linear(8, 3)
        self.register_buffer("steps", ember.zeros((), dtype=ember.int64))
        self.register_buffer("scratch", ember.zeros(2), persistent=False)
        self.not_a_param = ember.ones(2)  # a plain tensor attribute: neither parameter nor buffer

    def forward(self, x):
        self.steps += 1
        return self.fc2(self.block(self.fc1(x)))


EXPECTED_PARAMS = ["fc1.weight", "fc1.bias", "block.gain", "block.fc.weight", "block.fc.bias", "fc2.weight", "fc2.bias"]


def test_registration_by_assignment():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == EXPECTED_PARAMS
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in net.named_children()] == ["fc1", "block", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "block", "block.fc", "fc2"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert not isinstance(net.not_a_param, nn.Parameter)
    assert net.get_submodule("block.fc") is net.block.fc
    assert net.get_parameter("block.gain") is net.block.gain
    # The parameters of a C++ layer are the layer's own tensors, one Python object each.
    assert net.fc1.weight is net.fc1.weight
    assert net.fc1.weight.shape == (8, 4) and net.fc1.in_features == 4 and net.fc1.out_features == 8


def test_reassignment_and_deletion():
    net = Net()
    net.block = None
    assert "block" in net._modules and net.block is None
    assert [n for n, _ in net.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    net.extra = nn.Parameter(ember.zeros(3))
    assert "extra" in dict(net.named_parameters())
    del net.extra
    assert "extra" not in dict(net.named_parameters())
    with pytest.raises(TypeError):
        net.fc1 = 3  # a child slot takes a Module or None
    with pytest.raises(KeyError):
        net.register_buffer("fc1", ember.zeros(1))  # an existing attribute


def test_assignment_before_init_raises():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Broken()


def test_state_dict_round_trip():
    ember.manual_seed(1)
    a = Net()
    ember.manual_seed(2)
    b = Net()
    sd = a.state_dict()
    assert list(sd) == ["steps"] + EXPECTED_PARAMS  # own tensors first (as PyTorch); "scratch" is not persistent
    assert not any(t.requires_grad for t in sd.values())
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(to_numpy(pa), to_numpy(pb), err_msg=name)
    # The state dict shares storage with the module: it is a view, not a copy.
    with ember.no_grad():
        a.fc1.bias.fill_(7.0)
    assert sd["fc1.bias"].tolist() == [7.0] * 8


def test_load_state_dict_strict_reports_every_problem():
    net = Net()
    sd = net.state_dict()
    del sd["fc2.bias"]
    sd["surplus.weight"] = ember.zeros(1)
    with pytest.raises(ember.ValueError) as info:
        net.load_state_dict(sd)
    message = str(info.value)
    assert 'Missing key(s) in state_dict: "fc2.bias"' in message
    assert 'Unexpected key(s) in state_dict: "surplus.weight"' in message
    assert isinstance(info.value, ember.Error)
    # Not strict: the keys are reported back, and what matches is loaded.
    sd["fc1.bias"] = ember.full((8,), 3.0)
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["fc2.bias"] and result.unexpected_keys == ["surplus.weight"]
    assert net.fc1.bias.tolist() == [3.0] * 8
    # A shape mismatch is an error even when not strict, and nothing is copied then.
    sd["fc1.bias"] = ember.zeros(5)
    sd["fc1.weight"] = ember.zeros(8, 4)
    with pytest.raises(ember.ValueError, match=r"size mismatch for fc1.bias: copying a param with shape \[5\]"):
        net.load_state_dict(sd, strict=False)
    assert net.fc1.bias.tolist() == [3.0] * 8 and net.fc1.weight.abs().sum().item() > 0


def test_trains_with_sgd_and_the_loss_falls():
    ember.manual_seed(0)
    net = Net()
    x = ember.randn(32, 4)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    opt = ember.optim.SGD(net.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    assert net.steps.item() == 30  # the buffer was updated in forward


def test_train_eval_reach_cpp_layers():
    class WithDropout(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(x)

    m = WithDropout()
    x = ember.ones(1000)
    assert m.training and m.drop.training
    assert (m(x) == 0).sum().item() > 300
    m.eval()
    assert not m.training and not m.drop.training
    assert m(x).equal(x)
    m.train()
    assert m.drop.training
    m.drop.p = 0.0  # a setting the C++ forward reads on each call
    assert m(x).equal(x)


def test_to_keeps_identity_and_casts_floating_tensors_only():
    net = Net()
    w = net.fc1.weight
    opt = ember.optim.SGD(net.parameters(), lr=0.1)
    net.to(ember.float64)
    assert net.fc1.weight is w and w.dtype is ember.float64
    assert net.block.gain.dtype is ember.float64
    assert net.steps.dtype is ember.int64  # not floating: untouched
    # The C++ layer computes with the cast weight, and the optimizer steps it.
    out = net(ember.randn(2, 4, dtype=ember.float64))
    assert out.dtype is ember.float64
    out.sum().backward()
    before = w.clone()
    opt.step()
    assert not w.equal(before)
    net.float()
    assert w.dtype is ember.float32


def test_zero_grad_and_requires_grad():
    net = Net()
    net(ember.randn(2, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.fc1.requires_grad_(False)
    assert not net.fc1.weight.requires_grad and net.fc2.weight.requires_grad


def test_forward_hooks():
    net = Net()
    seen = []
    h1 = net.register_forward_pre_hook(lambda m, args: seen.append(("pre", args[0].shape)))
    h2 = net.register_forward_hook(lambda m, args, out: out * 0)  # replaces the output
    out = net(ember.randn(2, 4))
    assert seen == [("pre", (2, 4))] and out.abs().sum().item() == 0
    h1.remove()
    h2.remove()
    assert net(ember.randn(2, 4)).abs().sum().item() > 0
    # A hook on a C++ layer runs inside the C++ call, wherever the layer is called from.
    inner = []
    handle = net.block.fc.register_forward_hook(lambda m, args, out: inner.append((m is net.block.fc, out.shape)))
    net(ember.randn(3, 4))
    assert inner == [(True, (3, 8))]
    handle.remove()
    net(ember.randn(3, 4))
    assert len(inner) == 1


def test_cpp_layer_structure_is_fixed():
    lin = nn.Linear(2, 3)
    with pytest.raises(NotImplementedError, match="fixed"):
        lin.weight = nn.Parameter(ember.zeros(3, 2))
    with pytest.raises(NotImplementedError):
        lin.register_buffer("x", ember.zeros(1))
    # Values change in place.
    with ember.no_grad():
        lin.weight.copy_(ember.ones(3, 2))
        lin.bias.zero_()
    assert lin(ember.ones(1, 2)).tolist() == [[2.0, 2.0, 2.0]]


def test_children_of_cpp_models_are_replaced_by_built_in_modules():
    ember.manual_seed(0)
    model = nn.models.resnet18(num_classes=10, small_input=True)
    head = nn.Linear(512, 3)
    model.fc = head  # fine-tuning's new classifier: the C++ forward calls it
    assert model.fc is head
    x = ember.randn(2, 3, 8, 8)
    assert model(x).shape == (2, 3)
    names = dict(model.named_parameters())
    assert names["fc.weight"] is head.weight and names["fc.weight"].shape == (3, 512)
    assert model.state_dict()["fc.bias"].shape == (3,)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)  # the new head trains
    before = head.weight.detach().clone()
    F.cross_entropy(model(x), ember.tensor([0, 2])).backward()
    opt.step()
    assert not head.weight.equal(before)

    model.layer4[1] = nn.Identity()  # a C++ Sequential's child, through __setitem__
    assert type(model.layer4[1]) is nn.Identity and model(x).shape == (2, 3)

    with pytest.raises(ember.ValueError, match="ResNet.fc must be a Linear"):
        model.fc = nn.ReLU()
    assert model.fc is head and model(x).shape == (2, 3)  # a refusal changes nothing

    class Head(nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(NotImplementedError, match="Python module Head"):
        model.fc = Head()


def test_replacing_a_child_waits_for_forwards_running_in_other_threads():
    # Forwards run with the GIL released: without the tree lock, a replacement freed the old head
    # under another thread's forward (heap corruption, found by a fuzzing sweep).
    ember.manual_seed(0)
    model = nn.models.resnet18(num_classes=10, small_input=True)
    x = ember.randn(2, 3, 8, 8)
    heads = [nn.Linear(512, 3), nn.Linear(512, 5)]
    shapes, errors = set(), []

    def forwards():
        try:
            for _ in range(40):
                shapes.add(tuple(model(x).shape))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    thread = threading.Thread(target=forwards)
    thread.start()
    for i in range(200):
        model.fc = heads[i % 2]
    thread.join(timeout=120)
    assert not thread.is_alive() and not errors, errors
    assert shapes <= {(2, 3), (2, 5), (2, 10)} and shapes

    # From inside a forward (a hook) the replacement would wait for itself: refused.
    handle = model.layer1.register_forward_hook(lambda m, i, o: setattr(model, "fc", heads[0]))
    with pytest.raises(ember.StateError, match="while a forward runs in this thread"):
        model(x)
    handle.remove()
    assert model(x).shape in {(2, 3), (2, 5)}


def test_containers_and_repr():
    seq = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Linear)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert seq(ember.randn(5, 2)).shape == (5, 1)
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    assert len(list(ml.parameters())) == 6 and len(ml[1:]) == 2
    md = nn.ModuleDict({"a": nn.Linear(1, 2)})
    assert "a" in md and md["a"].out_features == 2
    text = repr(Net())
    assert "(fc1): Linear(in_features=4, out_features=8, bias=True)" in text
    assert "(block): Block(" in text


def test_parameter_semantics():
    t = ember.ones(3)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf and not t.requires_grad
    with ember.no_grad():
        p.mul_(2)
    assert t.tolist() == [2.0, 2.0, 2.0]  # shares t's elements
    assert repr(p).startswith("Parameter containing:")
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad and not q.is_same(p)
    frozen = nn.Parameter(ember.ones(1), requires_grad=False)
    assert not frozen.requires_grad


def test_functional_layers_agree():
    ember.manual_seed(3)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    x = ember.randn(2, 3, 6, 6)
    np.testing.assert_allclose(to_numpy(conv(x)), to_numpy(F.conv2d(x, conv.weight, conv.bias, padding=1)), atol=1e-6)
    assert F.conv2d(x, conv.weight, padding="same").shape == (2, 4, 6, 6)
    values, indices = F.max_pool2d(x, 2, return_indices=True)
    assert values.shape == (2, 3, 3, 3) and indices.dtype is ember.int64
    np.testing.assert_allclose(to_numpy(nn.AvgPool2d(2)(x)), to_numpy(F.avg_pool2d(x, 2)), atol=1e-6)
    ln = nn.LayerNorm(6)
    np.testing.assert_allclose(to_numpy(ln(x)), to_numpy(F.layer_norm(x, (6,), ln.weight, ln.bias)), atol=1e-6)
    logits = ember.randn(5, 4)
    target = ember.tensor([0, 1, 2, 3, 0])
    lp = F.log_softmax(logits, dim=1)
    np.testing.assert_allclose(F.cross_entropy(logits, target).item(), F.nll_loss(lp, target).item(), rtol=1e-6)
    np.testing.assert_allclose(nn.CrossEntropyLoss()(logits, target).item(), F.cross_entropy(logits, target).item())
    probs = F.one_hot(target, 4).float()
    np.testing.assert_allclose(F.cross_entropy(logits, probs).item(), F.cross_entropy(logits, target).item(), rtol=1e-5)
    z = ember.randn(10)
    t = (ember.randn(10) > 0).float()
    bce = F.binary_cross_entropy_with_logits(z, t)
    ref = F.binary_cross_entropy(ember.sigmoid(z), t)
    np.testing.assert_allclose(bce.item(), ref.item(), rtol=1e-5)
    q, k, v = ember.randn(2, 5, 8), ember.randn(2, 7, 8), ember.randn(2, 7, 8)
    scores = ember.softmax(q @ k.transpose(1, 2) / np.sqrt(8), dim=-1)
    np.testing.assert_allclose(to_numpy(F.scaled_dot_product_attention(q, k, v)), to_numpy(scores @ v), atol=1e-5)
    assert F.pad(ember.ones(2, 2), (1, 1)).shape == (2, 4)


def test_init_functions():
    w = ember.empty(64, 32)
    assert nn.init.zeros_(w) is w and w.abs().sum().item() == 0
    nn.init.kaiming_uniform_(w, a=np.sqrt(5))
    bound = 1 / np.sqrt(32)  # gain(leaky_relu, sqrt 5) * sqrt(3 / fan_in)
    assert w.abs().max().item() <= bound + 1e-7 and w.abs().max().item() > 0.5 * bound
    nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    assert w.abs().max().item() <= 0.04
    assert nn.init.calculate_gain("relu") == pytest.approx(np.sqrt(2))


def test_activation_checkpointing_gives_the_same_gradients():
    ember.manual_seed(0)
    lin = nn.Linear(6, 6)
    x = ember.randn(4, 6, requires_grad=True)
    ember.utils.checkpoint.checkpoint(lambda a: lin(a).tanh() * 2, x).sum().backward()
    g_ckpt, w_ckpt = x.grad.clone(), lin.weight.grad.clone()
    x.grad = None
    lin.zero_grad()
    (lin(x).tanh() * 2).sum().backward()
    assert x.grad.equal(g_ckpt) and lin.weight.grad.equal(w_ckpt)


def test_assigning_data_keeps_identity():
    lin = nn.Linear(2, 3)
    w = lin.weight
    w.grad = ember.ones(3, 2)
    w.data = ember.zeros(3, 2, dtype=ember.float64)
    assert lin.weight is w and w.dtype is ember.float64 and w.requires_grad
    assert w.grad is None  # a gradient of the old dtype no longer fits
    assert lin(ember.ones(1, 2, dtype=ember.float64)).dtype is ember.float64  # the C++ layer reads the new elements


def test_arguments_pytorch_refuses_are_refused():
    # Each used to give a silent result: rows of zeros, a broadcast loss, a padding row out of range.
    with pytest.raises(ValueError, match=r"class indices must be in \[0, 3\), got values from 0 to 5"):
        F.one_hot(ember.tensor([0, 5]), num_classes=3)
    with pytest.raises(ValueError, match="from -1 to 2"):
        F.one_hot(ember.tensor([-1, 2]))
    with pytest.raises(TypeError, match="integer tensor"):
        F.one_hot(ember.tensor([0.0, 1.0]))
    assert F.one_hot(ember.tensor([0, 2])).tolist() == [[1, 0, 0], [0, 0, 1]]
    assert F.one_hot(ember.tensor([], dtype=ember.int64), num_classes=2).shape == (0, 2)
    for loss in (F.binary_cross_entropy, F.binary_cross_entropy_with_logits):
        with pytest.raises(ValueError, match=r"target of shape \(3,\) for input of shape \(1,\)"):
            loss(ember.full((1,), 0.5), ember.ones(3))
    with pytest.raises(ValueError, match="padding_idx -5"):
        nn.Embedding(3, 3, padding_idx=-5)
    assert nn.Embedding(3, 2, padding_idx=-1).padding_idx == 2
    p = nn.Parameter(ember.zeros(2))
    with pytest.raises(ValueError, match="same tensor"):
        ember.optim.SGD([p, p], lr=0.1)


def test_assigned_gradients_and_hooks_keep_shape_dtype_and_device():
    x = ember.zeros(3, requires_grad=True)
    with pytest.raises(TypeError, match="float64 gradient to a float32"):
        x.grad = ember.zeros(3, dtype=ember.float64)
    with pytest.raises(ValueError, match="shape"):
        x.grad = ember.zeros(4)
    x.grad = ember.ones(3)
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    y = ember.zeros(3, requires_grad=True)
    y.register_hook(lambda g: ember.ones(5))
    with pytest.raises(ember.AutogradError, match=r"shape \(5,\)"):
        (y * 2).sum().backward()


def test_in_place_writes_through_shared_memory():
    t = ember.arange(5.0)
    t[1:] = t[:-1]  # the source is read whole first, as NumPy does
    assert t.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]
    s = ember.arange(4.0).view(2, 2)
    s.add_(s.t())
    assert s.tolist() == [[0.0, 3.0], [3.0, 6.0]]
    with pytest.raises(ValueError, match="share memory"):
        ember.ones(1).expand(3).mul_(2)
    assert ember.zeros(1).expand(3).fill_(2.0).tolist() == [2.0, 2.0, 2.0]


def test_more_arguments_pytorch_refuses():
    with pytest.raises(ValueError, match="min_val 2 must not be greater than max_val 1"):
        F.hardtanh(ember.zeros(2), 2, 1)
    with pytest.raises(ValueError, match="beta must not be negative"):
        F.smooth_l1_loss(ember.zeros(2), ember.ones(2), beta=-1.0)
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        ember.amp.GradScaler(device="tpu")
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="'inputs' cannot be empty"):
        ember.autograd.backward((x * 2).sum(), inputs=[])
