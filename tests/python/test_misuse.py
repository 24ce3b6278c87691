"""Misuse of the API that an earlier version crashed on, corrupted memory with or answered wrongly
(found by fuzzing the Python package): each case is the input that went wrong, and what it gives now."""

import gc
import os
import stat

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from conftest import to_numpy


def test_an_optimizer_refuses_a_parameter_changed_under_its_state():
    p = nn.Parameter(ember.ones(3))
    opt = ember.optim.Adam([p], lr=0.1)
    p.grad = ember.ones(3)
    opt.step()
    p.data = ember.ones(1000)  # the kernels would index exp_avg (3 elements) as 1000
    p.grad = ember.ones(1000)
    with pytest.raises(ember.ValueError, match=r"state 'exp_avg' of a parameter \(1000,\) float32 on cpu is \(3,\)"):
        opt.step()


def test_compile_step_keeps_its_optimizers_alive():
    p = nn.Parameter(ember.ones(3))

    def step(x):
        (p * x).sum().backward()
        return p.sum()

    compiled = ember.compile_step(step, optimizers=[ember.optim.SGD([nn.Parameter(ember.ones(1))], lr=0.1)])
    gc.collect()  # the optimizer made inline has no other reference
    assert compiled(ember.ones(3)).item() == 3.0
    with pytest.raises(TypeError, match="got NoneType"):
        ember.compile_step(lambda x: None)(ember.ones(1))


def test_a_built_in_model_refuses_a_cycle_and_deletions():
    model = nn.models.resnet18(num_classes=3)
    with pytest.raises(ember.ValueError, match="would be a cycle"):
        model.layer1[0] = model.layer1
    with pytest.raises(NotImplementedError, match="cannot be deleted"):
        del model.fc
    with pytest.raises(NotImplementedError, match="keep their length"):
        del model.layer4[0]
    vit = nn.models.vit_tiny(image_size=16, patch_size=8, depth=2)
    with pytest.raises(NotImplementedError, match="no new children"):
        vit.blocks.insert(0, nn.Identity())
    assert len(model.state_dict()) == len(model.cpp_state_dict_keys())


def test_saving_never_follows_a_planted_link_or_replaces_a_special_file(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    target = tmp_path / "model.safetensors"
    os.symlink(victim, f"{target}.tmp.{os.getpid()}")  # where the temporary file goes
    ember.save_file({"w": ember.ones(2)}, str(target))
    assert victim.read_text() == "precious\n" and not target.is_symlink()
    assert to_numpy(ember.load_file(str(target))["w"]).tolist() == [1.0, 1.0]
    # A link to a file is written through; the file keeps its mode.
    real = tmp_path / "run3.safetensors"
    ember.save_file({"w": ember.zeros(1)}, str(real))
    os.chmod(real, 0o600)
    link = tmp_path / "latest.safetensors"
    os.symlink(real, link)
    for save, load in ((ember.save_file, ember.load_file), (ember.save, ember.load)):
        save({"w": ember.full((1,), 7.0)}, str(link))
        assert link.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o600
        assert to_numpy(load(str(link))["w"]).tolist() == [7.0]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for save in (ember.save_file, ember.save):
        with pytest.raises(ember.IOError, match="not a regular file"):
            save({"w": ember.ones(1)}, str(fifo))
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(ember.IOError, match="not a regular file"):
        ember.load(str(fifo))  # would wait for a writer; /dev/zero would fill memory
    with pytest.raises(ember.IOError, match="not a regular file"):
        ember.load("/dev/zero")


def test_optimizer_groups_and_state_dicts_are_checked_before_anything_changes():
    p, q = nn.Parameter(ember.ones(3)), nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9)
    with pytest.raises(TypeError, match="lr must be a number"):
        opt.add_param_group({"params": [q], "lr": "bad"})
    with pytest.raises(TypeError, match="betas must be a pair"):
        ember.optim.Adam([q], betas=0.5)
    assert len(opt.param_groups) == 1 and opt._cpp.num_groups() == 1  # no group left behind
    opt.add_param_group({"params": [q]})  # q was not taken by the failed call
    p.grad = ember.ones(3)
    opt.step()
    adam = ember.optim.Adam([nn.Parameter(ember.ones(3)), nn.Parameter(ember.ones(2))])
    with pytest.raises(ember.ValueError, match="has dampening, momentum, nesterov, which Adam does not take"):
        adam.load_state_dict(opt.state_dict())
    with pytest.raises(TypeError, match="expects a dict with 'state' and 'param_groups'"):
        adam.load_state_dict([1, 2])


def test_values_that_are_not_what_their_type_says():
    with pytest.raises(ember.ValueError, match="byte 0 is 2, not a bool"):
        ember.frombuffer(bytearray(b"\x02\x01\x00\x01"), dtype=ember.bool)
    x = ember.randn(3, requires_grad=True)
    with pytest.raises(ember.DTypeError, match="floating data only, got int64"):
        x.data = ember.ones(3, dtype=ember.int64)
    with pytest.raises(ember.IndexError, match="out of bounds"):
        F.cross_entropy(ember.randn(3, 0), ember.tensor([0, 0, 0]))  # gave nan
    with pytest.raises(ember.ValueError, match="returned no tensor"):
        ember.autograd.gradcheck(lambda t: None, [ember.randn(4, dtype=ember.float64, requires_grad=True)])
    for scale in (1e39, 1e-40, float("inf")):
        with pytest.raises(ember.ValueError, match="normal float32"):
            ember.amp.GradScaler("cpu", init_scale=scale)
    with pytest.raises(ember.ValueError, match="invalid eps -1e-08"):
        ember.optim.Adam([nn.Parameter(ember.ones(1))], eps=-1e-8)
    with pytest.raises(TypeError, match="num_classes must be an int"):
        F.one_hot(ember.tensor([0, 1]), num_classes=2.5)
    with pytest.raises(TypeError, match="must be integers"):
        nn.Sequential(nn.ReLU())[0.7]
    with pytest.raises(TypeError, match="dict-like"):
        nn.Linear(2, 2).load_state_dict(ember.ones(2))


def test_module_casts_keep_gradients_and_parameters_load_weights_only(tmp_path):
    m = nn.Linear(2, 2)
    m(ember.ones(1, 2)).sum().backward()
    m.double()
    assert m.weight.grad is not None and m.weight.grad.dtype is ember.float64
    path = str(tmp_path / "params.pt")
    ember.save({"p": nn.Parameter(ember.ones(2))}, path)
    assert isinstance(ember.load(path)["p"], nn.Parameter)  # weights_only=True, as PyTorch allows


def test_a_long_graph_is_freed_without_recursion():
    w = ember.randn(4, requires_grad=True)
    total = w.sum()
    for _ in range(300_000):  # a running loss kept as a tensor: one node per iteration (200,000 overflowed)
        total = total + 1
    total = None  # freed node by node, not one destructor inside the next
    assert w.grad is None


def test_window_arguments_that_would_overflow_are_refused():
    x = ember.randn(1, 1, 5, 5)
    with pytest.raises(ember.ValueError, match=r"at most 2\^31 - 1"):
        F.avg_pool2d(x, 2**63 - 1, stride=1, padding=2**62 - 1)  # returned the plain sum: kh * kw wrapped
    with pytest.raises(ember.ValueError, match=r"at most 2\^31 - 1"):
        F.conv2d(x, ember.randn(1, 1, 3, 3), padding=2**63 - 1)  # gave shape (1, 1, 1, 1)
    with pytest.raises(ember.ValueError, match=r"at most 2\^31 - 1"):
        F.max_pool2d(x, 3, stride=1, padding=1, dilation=2**62)
    with pytest.raises(ember.ShapeError, match=r"the kernel size must be positive, got \(0, 0\)"):
        F.conv2d(x, ember.randn(4, 1, 0, 0))


def test_arguments_of_the_wrong_kind_are_named():
    with pytest.raises(TypeError, match=r"Dropout.p must be a number, got str"):
        nn.Dropout().p = "x"
    with pytest.raises(TypeError, match="normalized_shape must be an int or a sequence of ints"):
        F.layer_norm(ember.ones(2, 3), "a")
    with pytest.raises(TypeError, match="padding must be an int or an"):
        nn.Conv2d(2, 4, 3, padding="bogus")
    with pytest.raises(ValueError, match="must be 2-D"):
        nn.Embedding.from_pretrained(ember.randn(10))
    assert nn.Linear(2, 2).to(dtype="float64").weight.dtype is ember.float64
    with pytest.raises(TypeError, match="dtype must be an ember.dtype"):
        nn.Linear(2, 2).to(dtype=3)
    with pytest.raises(TypeError, match="world_size must be an int"):
        ember.distributed.init_process_group(world_size="2", rank=0)


def test_compile_step_refuses_what_a_replay_cannot_do():
    model = nn.Linear(4, 1)
    step = ember.compile_step(lambda x: model(x).sum())
    with pytest.raises(ember.CaptureError, match="input 0 requires grad"):
        step(ember.randn(2, 4, requires_grad=True))
    doubling = ember.compile_step(lambda x: x.mul_(2).sum())
    with pytest.raises(ember.CaptureError, match="wrote into input 0 in place"):
        doubling(ember.ones(2))


def test_serialization_names_the_argument_that_is_wrong(tmp_path):
    path = str(tmp_path / "t.pt")
    ember.save({"w": ember.ones(2)}, path)
    with pytest.raises(ember.ValueError, match=r"map_location gave 5 for 'cpu', not a device"):
        ember.load(path, map_location=lambda device: 5)
    with pytest.raises(ember.ValueError, match="map_location gave 'nowhere'"):
        ember.load(path, map_location={"cpu": "nowhere"})
    with open(path, encoding="latin-1") as text:
        with pytest.raises(TypeError, match="binary mode"):
            ember.load(text)
    model = nn.Linear(2, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    python_scheduler = ember.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    with pytest.raises(TypeError, match="the scheduler state's .* not a tensor"):
        ember.save_checkpoint(str(tmp_path / "c.safetensors"), model, opt, python_scheduler)
    with pytest.raises(TypeError, match="model must be a Module or a state dict, got int"):
        ember.save_checkpoint(str(tmp_path / "c.safetensors"), 5)
    assert not (tmp_path / "c.safetensors").exists()


def test_flags_that_python_would_coerce_are_refused():
    x = ember.randn(2, requires_grad=True)
    with pytest.raises(ValueError, match="cannot be empty"):
        ember.autograd.grad((x * 2).sum(), [])
    with pytest.raises(ValueError, match="NaN"):
        F.smooth_l1_loss(x, x, beta=float("nan"))
    with pytest.raises(TypeError, match="enabled must be a bool"):
        ember.amp.autocast("cpu", enabled="no")
    with pytest.raises(TypeError, match="growth_interval must be an int"):
        ember.amp.GradScaler("cpu", growth_interval=2.5)


def test_an_optimizer_state_dict_with_a_key_that_is_no_index():
    p = nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9)
    groups = opt.state_dict()["param_groups"]
    with pytest.raises(ember.ValueError, match="state key 'a' is not a parameter index"):
        opt.load_state_dict({"state": {"a": {"momentum_buffer": ember.ones(2)}}, "param_groups": groups})


def test_a_master_weight_step_before_any_backward_says_so():
    model = nn.Linear(2, 2)
    precision = ember.amp.TrainingPrecision(model, "naive_fp16", ember.optim.SGD, lr=0.1)
    with pytest.raises(ember.StateError, match="no loss was scaled yet"):
        precision.step()  # was an UndefinedTensorError from inside the loss scaler
