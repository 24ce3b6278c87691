"""Files: safetensors (``ember.save_file`` / ``ember.load_file``, as ``safetensors.torch``) and the
training checkpoints of ember's C++ training program (``ember.load_checkpoint`` /
``ember.save_checkpoint``), both read and written by ember's C++ (tensor/safetensors.h,
train/checkpoint.h). A bad file raises ``ember.FormatError``, an unreadable one ``ember.IOError``; the
message names the path. Writes are atomic: a crash mid-save leaves the previous file intact."""

import os

from . import _ember
from ._ember import Tensor

__all__ = ["load_checkpoint", "load_file", "save_checkpoint", "save_file"]


def _path(filename, who):
    try:
        return os.fspath(filename)
    except TypeError:
        raise TypeError(f"{who}: filename must be a str or os.PathLike, got {type(filename).__name__}") from None


def save_file(tensors, filename, metadata=None):
    """Writes a dict of name -> tensor (copied to the host, contiguous) and optional str -> str metadata
    to a safetensors file."""
    if not isinstance(tensors, dict):
        raise TypeError(f"save_file: tensors must be a dict of name -> Tensor, got {type(tensors).__name__}")
    for name, t in tensors.items():
        if not isinstance(name, str) or not isinstance(t, Tensor):
            raise TypeError(f"save_file: entries must be str -> Tensor, got {type(name).__name__} -> {type(t).__name__}")
    meta = {} if metadata is None else {str(k): str(v) for k, v in metadata.items()}
    _ember._save_safetensors(_path(filename, "save_file"), {k: t.detach() for k, t in tensors.items()}, meta)


def load_file(filename, device="cpu"):
    """The tensors of a safetensors file, by name, on ``device``; the file is fully validated first."""
    tensors, _ = _ember._load_safetensors(_path(filename, "load_file"))
    if str(device) != "cpu":
        tensors = {k: t.to(device) for k, t in tensors.items()}
    return dict(sorted(tensors.items()))


def load_metadata(filename):
    """The ``__metadata__`` entries of a safetensors file (str -> str)."""
    return dict(_ember._load_safetensors(_path(filename, "load_metadata"))[1])


def load_checkpoint(filename):
    """The sections of a checkpoint written by ember's C++ training program (or save_checkpoint); a
    sharded (ZeRO) checkpoint is put together whole. Returns a dict:

    - "model": the model's state dict (load it with ``model.load_state_dict(c["model"])``; the names are
      ember's C++ ones, which a built-in model and ``nn.models.make_model`` have),
    - "optimizer", "scheduler", "precision", "runner": those flat state dicts (C++ key layout),
    - "epoch", "iteration", "loader_position" (epoch, batch), "rng" (seed, offset), "info" (str -> str).
    """
    return _ember._load_checkpoint(_path(filename, "load_checkpoint"))


def save_checkpoint(filename, model=None, optimizer=None, scheduler=None, epoch=0, iteration=0, info=None):
    """Writes a checkpoint in ember's C++ training format (model under "model.", an ember.optim
    optimizer's C++ state under "optimizer.", a C++ scheduler's under "scheduler."), with the default
    generator's state: the file ``load_checkpoint`` and the C++ program read."""

    def flat(obj):
        if obj is None:
            return {}
        if isinstance(obj, dict):
            return {k: v.detach() for k, v in obj.items()}
        cpp = getattr(obj, "_cpp", None)
        if cpp is not None and hasattr(cpp, "state_dict"):
            return dict(cpp.state_dict())
        return {k: v.detach() for k, v in obj.state_dict().items()}

    model_state = {} if model is None else {k: v.detach() for k, v in (model if isinstance(model, dict) else model.state_dict()).items()}
    _ember._save_checkpoint(_path(filename, "save_checkpoint"), model_state, flat(optimizer), flat(scheduler),
                            int(epoch), int(iteration), {str(k): str(v) for k, v in (info or {}).items()})
