"""ember.save_file / load_file (safetensors) and the training checkpoints of ember's C++ program."""

import json
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
