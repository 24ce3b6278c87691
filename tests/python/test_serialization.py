"""ember.save_file / load_file (safetensors), the training checkpoints of ember's C++ program, and
ember.save / ember.load (pickled objects holding tensors, as torch.save / torch.load)."""

import io
import json
import pickle
import struct
import os
import pathlib
import subprocess

import numpy as np
import pytest

import ember
import ember.nn as nn
from conftest import to_numpy


def test_safetensors_round_trip(tmp_path):
    tensors = {
        "f32": ember.randn(3, 4),
        "f64": ember.randn(2, dtype=ember.float64),
        "f16": ember.randn(5).half(),
        "bf16": ember.randn(2, 2).bfloat16(),
        "i64": ember.arange(6).reshape(2, 3),
        "i32": ember.tensor([1, -2], dtype=ember.int32),
        "u8": ember.tensor([0, 255], dtype=ember.uint8),
        "bool": ember.tensor([True, False]),
        "scalar": ember.tensor(3.5),
        "empty": ember.zeros(0, 3),
        "view": ember.arange(12.0).reshape(3, 4).T,  # non-contiguous: written dense
    }
    path = tmp_path / "t.safetensors"
    ember.save_file(tensors, path, metadata={"step": 7})
    loaded = ember.load_file(str(path))
    assert sorted(loaded) == sorted(tensors)
    for name, t in tensors.items():
        got = loaded[name]
        assert got.dtype is t.dtype and got.shape == t.shape, name
        np.testing.assert_array_equal(to_numpy(got), to_numpy(t), err_msg=name)
    assert ember.serialization.load_metadata(path) == {"step": "7"}


def test_model_state_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    ember.save_file(model.state_dict(), tmp_path / "m.safetensors")
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_state_dict(ember.load_file(tmp_path / "m.safetensors"))
    for a, b in zip(model.parameters(), other.parameters()):
        assert a.equal(b)


def test_corrupt_truncated_and_missing_files_raise_typed_errors(tmp_path):
    bad = tmp_path / "corrupt.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(ember.FormatError) as info:
        ember.load_file(bad)
    assert str(bad) in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ember.Error)

    good = tmp_path / "good.safetensors"
    ember.save_file({"x": ember.randn(100)}, good)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-17])
    with pytest.raises(ember.FormatError, match="cut.safetensors"):
        ember.load_file(cut)

    missing = tmp_path / "nowhere" / "x.safetensors"
    with pytest.raises(ember.IOError) as info:
        ember.load_file(missing)
    assert "x.safetensors" in str(info.value) and isinstance(info.value, OSError)
    with pytest.raises(ember.IOError):
        ember.save_file({"x": ember.ones(1)}, missing)


def test_save_file_checks_its_arguments(tmp_path):
    with pytest.raises(TypeError):
        ember.save_file([ember.ones(1)], tmp_path / "a.safetensors")
    with pytest.raises(TypeError):
        ember.save_file({"x": 1.0}, tmp_path / "a.safetensors")
    with pytest.raises(ember.ValueError):
        ember.save_file({"__metadata__": ember.ones(1)}, tmp_path / "a.safetensors")


def test_training_checkpoint_loads_into_the_python_model(tmp_path):
    ember.manual_seed(0)
    model = nn.models.make_model("cnn", 1, 28, 10)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = ember.optim.lr_scheduler.StepLR(opt, 2)
    model(ember.randn(2, 1, 28, 28)).sum().backward()
    opt.step()
    sched.step()
    path = tmp_path / "epoch_1.safetensors"
    ember.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, epoch=1, iteration=5, info={"model": "cnn"})

    # The file has the C++ program's layout: model.<name>, optimizer.<key>, scheduler.<key>.
    raw = ember.load_file(path)
    assert {k[len("model."):] for k in raw if k.startswith("model.")} == set(model.cpp_state_dict_keys())
    assert "optimizer.state.0.momentum_buffer" in raw and "scheduler.last_epoch" in raw
    assert ember.serialization.load_metadata(path)["format"] == "ember-checkpoint/1"

    c = ember.load_checkpoint(path)
    assert c["epoch"] == 1 and c["iteration"] == 5 and c["info"] == {"model": "cnn"}
    ember.manual_seed(1)
    fresh = nn.models.make_model("cnn", 1, 28, 10)
    fresh.load_state_dict(c["model"])  # strict: every C++ name is a Python name
    for (name, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert a.equal(b), name
    opt2 = ember.optim.SGD(fresh.parameters(), lr=0.5, momentum=0.9)
    opt2._cpp.load_state_dict(c["optimizer"])
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]

    not_a_checkpoint = tmp_path / "plain.safetensors"
    ember.save_file({"x": ember.ones(1)}, not_a_checkpoint)
    with pytest.raises(ember.FormatError, match="plain.safetensors"):
        ember.load_checkpoint(pathlib.Path(not_a_checkpoint))


FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.environ.get("EMBER_TRAIN_PROGRAM"), reason="examples/train is not built")
@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST), reason="Fashion-MNIST is not installed (dataset-fashion-mnist)")
def test_model_trained_by_examples_train_scores_the_same_in_python(tmp_path):
    # Ten deterministic steps of the C++ program, then its validation of the first 1000 test images.
    val_samples = 1000
    subprocess.run([os.environ["EMBER_TRAIN_PROGRAM"], "--model", "cnn", "--epochs", "1", "--train-samples", "640",
                    "--val-samples", str(val_samples), "--batch-size", "64", "--num-workers", "0", "--threads", "1",
                    "--deterministic", "--work-dir", str(tmp_path)], check=True, capture_output=True, timeout=120)
    logged = [json.loads(line) for line in (tmp_path / "scalars.json").read_text().splitlines()]
    val = next(entry for entry in logged if entry["mode"] == "val")

    model = nn.models.make_model("cnn", 1, 28, 10)
    model.load_state_dict(ember.load_checkpoint(tmp_path / "epoch_1.safetensors")["model"])
    model.eval()
    # The program's validation pipeline: the test images in order, normalised by the training set's statistics.
    test_set = ember.datasets.FashionMNIST(FASHION_MNIST, train=False, transform=ember.datasets.Normalize(0.2860, 0.3530))
    images, labels = next(iter(ember.utils.data.DataLoader(test_set, batch_size=val_samples)))
    with ember.no_grad():
        logits = model(images)
    top1 = int((logits.argmax(1) == labels).sum().item())
    label_logit = logits.gather(1, labels.unsqueeze(1))
    top5 = int(((logits > label_logit).sum(1) < 5).sum().item())
    # Counts out of 1000: the log's percentages to 0.1 are exact, so any differing prediction shows.
    assert (top1, top5) == (round(val["accuracy/top1"] * 10), round(val["accuracy/top5"] * 10))
    assert 200 < top1 < 1000, "ten steps of training should beat chance (100) without being perfect"


def _trained_state():
    model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3))
    optimizer = ember.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = ember.optim.lr_scheduler.CosineAnnealingLR(optimizer, 10)
    model(ember.randn(4, 2, 3, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler


def test_save_load_round_trip_of_a_training_state(tmp_path):
    model, optimizer, scheduler = _trained_state()
    shared = ember.arange(6.0).reshape(2, 3)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": 3,
        "note": "best",
        "dtypes": [ember.float16, ember.bfloat16],
        "device": ember.device("cpu"),
        "size": ember.zeros(2, 3).shape,
        "bf16": ember.randn(4).bfloat16(),
        "leaf": ember.ones(2, requires_grad=True),
        "view": shared.T,
        "twice": (shared, shared),
    }
    path = tmp_path / "state.pt"
    ember.save(state, path)
    back = ember.load(path)
    assert back.keys() == state.keys() and back["epoch"] == 3 and back["note"] == "best"
    assert back["dtypes"] == [ember.float16, ember.bfloat16] and back["device"] == "cpu"
    assert back["size"] == (2, 3) and type(back["size"]) is type(state["size"])
    for name, t in state["model"].items():
        assert back["model"][name].dtype is t.dtype and back["model"][name].tolist() == t.tolist()
    assert back["bf16"].dtype is ember.bfloat16 and back["bf16"].tolist() == state["bf16"].tolist()
    assert back["leaf"].requires_grad and back["view"].tolist() == shared.T.tolist()
    assert back["twice"][0] is back["twice"][1]  # one tensor saved once stays one tensor
    fresh_model, fresh_optimizer, fresh_scheduler = _trained_state()
    fresh_model.load_state_dict(back["model"])
    fresh_optimizer.load_state_dict(back["optimizer"])
    fresh_scheduler.load_state_dict(back["scheduler"])
    x = ember.randn(1, 2, 3, 3)
    model.eval(), fresh_model.eval()
    assert fresh_model(x).tolist() == model(x).tolist()
    assert fresh_scheduler.get_last_lr() == scheduler.get_last_lr()


def test_save_load_through_file_objects_and_map_location():
    buffer = io.BytesIO()
    ember.save({"w": ember.arange(3.0)}, buffer)
    buffer.seek(0)
    assert ember.load(buffer, map_location="cpu")["w"].tolist() == [0.0, 1.0, 2.0]
    seen = []
    buffer.seek(0)
    ember.load(buffer, map_location=lambda device: seen.append(device) or "cpu")
    assert seen == ["cpu"]
    buffer.seek(0)
    assert ember.load(buffer, map_location={"cuda:0": "cpu"})["w"].device == "cpu"


class _Custom:
    def __init__(self):
        self.value = 7


def test_weights_only_refuses_what_could_run_code(tmp_path):
    path = tmp_path / "custom.pt"
    ember.save({"obj": _Custom(), "w": ember.ones(1)}, path)
    with pytest.raises(pickle.UnpicklingError, match="_Custom, which weights_only=True does not load"):
        ember.load(path)
    assert ember.load(path, weights_only=False)["obj"].value == 7
    # A hand-made file that would call os.system on load.
    evil = tmp_path / "evil.pt"
    evil.write_bytes(b"EMBERPKL\x01" + pickle.dumps(_Exploit()))
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        ember.load(evil)


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo should-not-run",))


def test_load_names_the_file_of_each_kind_of_bad_input(tmp_path):
    good = tmp_path / "good.pt"
    ember.save({"w": ember.randn(64, 64)}, good)
    data = good.read_bytes()
    cases = {
        "truncated.pt": (data[: len(data) // 2], ember.FormatError, "truncated or corrupt"),
        "header_only.pt": (data[:9], ember.FormatError, "truncated or corrupt"),
        "empty.pt": (b"", ember.FormatError, "not a file ember.save wrote"),
        "random.pt": (os.urandom(256), ember.FormatError, "not a file ember.save wrote"),
        "torch.pt": (b"PK\x03\x04" + b"\0" * 60, ember.FormatError, "PyTorch zip checkpoint"),
        "version.pt": (b"EMBERPKL\x07" + data[9:], ember.FormatError, "format version 7"),
        "flipped.pt": (data[:9] + bytes([data[9] ^ 0xFF]) + data[10:], ember.FormatError, "corrupt"),
    }
    for name, (content, error, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(error, match=words) as info:
            ember.load(path)
        assert name in str(info.value)
    with pytest.raises(ember.IOError, match="missing.pt"):
        ember.load(tmp_path / "missing.pt")
    with pytest.raises(ember.IOError, match="no_such_dir"):
        ember.save({}, tmp_path / "no_such_dir" / "x.pt")


def _global(module, name):
    return b"c" + module + b"\n" + name + b"\n"


def _rebuild_call(data_ref, dtype, shape, requires_grad, device):
    """Pickle opcodes (protocol 2) of _rebuild(<data_ref>, dtype, shape, requires_grad, device)."""
    text = lambda s: b"X" + struct.pack("<I", len(s)) + s
    return (b"h\x00(" + data_ref + text(dtype) + b"(" + b"".join(b"J" + struct.pack("<i", v) for v in shape) + b"t" +
            (b"\x88" if requires_grad else b"\x89") + text(device) + b"tR")


def test_crafted_files_cannot_amplify_memory_or_escape_the_file_name(tmp_path):
    # set(range(10**12)) in 60 bytes: range is no longer a global weights_only loads.
    bomb = tmp_path / "bomb.pt"
    bomb.write_bytes(b"EMBERPKL\x01\x80\x02" + _global(b"builtins", b"set") + b"(" + _global(b"builtins", b"range") +
                     b"(\x8a\x08" + struct.pack("<q", 10**12) + b"tRtR.")
    with pytest.raises(pickle.UnpicklingError, match="builtins.range, which weights_only=True does not load"):
        ember.load(bomb)
    # One stored 64 KiB buffer rebuilt 2,000 times: one tensor, not 125 MiB of copies.
    n = 1 << 16
    body = (b"\x80\x02" + _global(b"ember._tensor", b"_rebuild") + b"q\x00" + b"B" + struct.pack("<I", n) +
            b"\x07" * n + b"q\x01(")
    body += _rebuild_call(b"h\x01", b"uint8", [n], False, b"cpu") * 2000 + b"l."
    many = tmp_path / "many.pt"
    many.write_bytes(b"EMBERPKL\x01" + body)
    tensors = ember.load(many)
    assert len(tensors) == 2000 and all(t is tensors[0] for t in tensors) and tensors[0][5].item() == 7
    # Errors about a tensor the file describes name the file, with their own type.
    cases = {
        "function_dtype.pt": (b"tensor", [2], False, b"cpu", ember.FormatError, "'tensor', which is no ember dtype"),
        "int_grad.pt": (b"int64", [1], True, b"cpu", ember.Error, "int"),
    }
    for name, (dtype, shape, grad, device, error, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(b"EMBERPKL\x01\x80\x02" + _global(b"ember._tensor", b"_rebuild") + b"q\x00" +
                         _rebuild_call(b"C\x08" + b"\0" * 8, dtype, shape, grad, device) + b".")
        with pytest.raises(error, match=words) as info:
            ember.load(path)
        assert str(info.value).startswith(f"load: '{path}'"), str(info.value)


def test_a_flipped_bit_fails_the_checksum_and_version_1_files_still_load(tmp_path):
    path = tmp_path / "w.pt"
    ember.save({"w": ember.arange(64.0), "step": 3}, path)
    data = bytearray(path.read_bytes())
    assert data[:9] == b"EMBERPKL\x02"
    data[len(data) // 2] ^= 0x04  # inside the tensor's bytes: a pickle that still unpickles
    path.write_bytes(bytes(data))
    with pytest.raises(ember.FormatError, match="fails the checksum"):
        ember.load(path)
    old = tmp_path / "old.pt"  # as ember wrote before the checksum: version 1
    old.write_bytes(b"EMBERPKL\x01" + pickle.dumps({"step": 3}))
    assert ember.load(old) == {"step": 3}


def test_a_failed_save_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "state.pt"
    ember.save({"w": ember.ones(2)}, path)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        ember.save({"f": lambda: 0}, path)
    assert ember.load(path)["w"].tolist() == [1.0, 1.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pt"]


def test_paths_with_a_nul_and_fifos_are_refused(tmp_path):
    # open() would stop at the NUL and use another file; a FIFO would block the load forever.
    target = tmp_path / "x"
    for call in (lambda p: ember.save_file({"a": ember.ones(1)}, p), lambda p: ember.load_file(p),
                 lambda p: ember.save({"a": 1}, p), lambda p: ember.load(p), lambda p: ember.load_checkpoint(p)):
        with pytest.raises(ValueError, match="NUL"):
            call(str(target) + "\0junk")
    assert not target.exists()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ember.IOError, match="not a regular file"):
        ember.load_file(fifo)
    with pytest.raises(ember.IOError, match="not a regular file"):
        ember.load_checkpoint(fifo)


def test_save_checkpoint_refuses_counts_load_checkpoint_would_refuse(tmp_path):
    path = tmp_path / "c.ckpt"
    for bad in ({"epoch": -5}, {"iteration": -1}, {"epoch": 2**70}, {"epoch": 1.5}):
        with pytest.raises(ValueError, match="from 0 to 2\\*\\*63 - 1"):
            ember.save_checkpoint(path, model={"w": ember.ones(1)}, **bad)
    assert not path.exists()
    ember.save_checkpoint(path, model={"w": ember.ones(1)}, epoch=3, iteration=40)
    loaded = ember.load_checkpoint(path)
    assert (loaded["epoch"], loaded["iteration"]) == (3, 40)
