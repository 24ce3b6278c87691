"""Files: safetensors (``ember.save_file`` / ``ember.load_file``, as ``safetensors.torch``), the
training checkpoints of ember's C++ training program (``ember.load_checkpoint`` /
``ember.save_checkpoint``), both read and written by ember's C++ (tensor/safetensors.h,
train/checkpoint.h), and pickled Python objects holding tensors (``ember.save`` / ``ember.load``, as
``torch.save`` / ``torch.load``). A bad file raises ``ember.FormatError``, an unreadable one
``ember.IOError``; the message names the path. Writes are atomic: a crash mid-save leaves the
previous file intact."""

import io
import os
import pickle
import stat
import struct
import zlib

from collections.abc import Mapping

from . import _ember
from ._ember import Tensor

__all__ = ["load", "load_checkpoint", "load_file", "save", "save_checkpoint", "save_file"]


def _path(filename, who):
    try:
        path = os.fspath(filename)
    except TypeError:
        raise TypeError(f"{who}: filename must be a str or os.PathLike, got {type(filename).__name__}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "\0" in path:
        raise ValueError(f"{who}: the path {path!r} holds a NUL character")
    return path


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

    def tensors(what, state):
        # The C++ format holds tensors only: a state of other values (a scheduler written in Python) is
        # named, to be saved with ember.save beside the checkpoint.
        for k, v in state.items():
            if not isinstance(v, Tensor):
                raise TypeError(f"save_checkpoint: the {what} state's {k!r} is a {type(v).__name__}, not a tensor; "
                                "this format holds ember's C++ states (save others with ember.save)")
        return {k: v.detach() for k, v in state.items()}

    def flat(what, obj):
        if obj is None:
            return {}
        if isinstance(obj, Mapping):
            return tensors(what, obj)
        cpp = getattr(obj, "_cpp", None)
        if cpp is not None and hasattr(cpp, "state_dict"):
            return dict(cpp.state_dict())
        if not hasattr(obj, "state_dict"):
            raise TypeError(f"save_checkpoint: {what} must have a state_dict() or be a dict of tensors, got "
                            f"{type(obj).__name__}")
        return tensors(what, obj.state_dict())

    for name, value in (("epoch", epoch), ("iteration", iteration)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            # load_checkpoint refuses what is not a count: refuse it before writing such a file
            raise ValueError(f"save_checkpoint: {name} must be an int from 0 to 2**63 - 1, got {value!r}")
    if model is not None and not isinstance(model, Mapping) and not hasattr(model, "state_dict"):
        raise TypeError(f"save_checkpoint: model must be a Module or a state dict, got {type(model).__name__}")
    model_state = {} if model is None else tensors("model", model if isinstance(model, Mapping) else model.state_dict())
    _ember._save_checkpoint(_path(filename, "save_checkpoint"), model_state, flat("optimizer", optimizer),
                            flat("scheduler", scheduler),
                            int(epoch), int(iteration), {str(k): str(v) for k, v in (info or {}).items()})


# ---- ember.save / ember.load: a pickle behind a header of its own

_MAGIC = b"EMBERPKL"
# Version 2 puts the CRC-32 (zlib's, little-endian) of the pickle after the version byte: a flipped bit
# in a pickle often still unpickles, as other tensor values or another structure. Version 1 has none.
_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save's zip container

# What weights_only=True lets a file name: the tensor, dtype, device and Size types, and the plain
# containers a state dict is made of (PyTorch's weights_only unpickler allows the same kind of set).
_SAFE_GLOBALS = {
    ("ember._tensor", "_rebuild"),
    ("ember.nn.modules", "_rebuild_parameter"),  # a Parameter: the tensor rebuilt by a global checked here too
    ("ember._ember", "device"),
    ("ember", "Size"),
    ("collections", "OrderedDict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("builtins", "slice"),
}


def save(obj, f, pickle_protocol=pickle.DEFAULT_PROTOCOL):
    """Writes ``obj`` (tensors, state dicts, nested dicts, lists and tuples of them, numbers, strings) to
    ``f``, a path or a binary file object, as ``torch.save`` does; ``ember.load`` reads it back. Tensors
    keep their dtype, shape, device, ``requires_grad`` (leaves) and sharing within one file; views are
    saved as their own elements. A path is written atomically. The format is a pickle behind an ember
    header, not PyTorch's zip: to exchange weights with PyTorch, use ``save_file`` (safetensors)."""
    pickled = pickle.dumps(obj, protocol=pickle_protocol)
    payload = _MAGIC + bytes([_VERSION]) + struct.pack("<I", zlib.crc32(pickled)) + pickled
    if hasattr(f, "write"):
        f.write(payload)
        return
    # ember's C++ writer (tensor/atomic_file.h): it writes through a symbolic link, keeps an existing
    # file's mode, and leaves anything but a regular file (a device, a FIFO, a directory) alone.
    _ember._write_file_atomic(_path(f, "save"), payload)


def _device_name(value, what):
    """value as a device string, or an ember.ValueError naming map_location (not the file) as the problem."""
    if isinstance(value, _ember.device):
        return str(value)
    if isinstance(value, str):
        try:
            return str(_ember.device(value))
        except _ember.Error as e:
            raise _ember.ValueError(f"load: map_location gave {value!r} {what}, which is not a device ({e})") from None
    raise _ember.ValueError(f"load: map_location gave {value!r} {what}, not a device or a device string")


def _device_map(map_location):
    """A function from a saved device string to the one to load onto."""
    if map_location is None:
        return lambda device: device
    if callable(map_location):
        return lambda device: _device_name(map_location(device), f"for {device!r}")
    if isinstance(map_location, dict):
        table = {str(k): _device_name(v, f"for {k!r}") for k, v in map_location.items()}
        return lambda device: table.get(device, device)
    target = _device_name(map_location, "")
    return lambda device: target


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, where, weights_only, device_of):
        super().__init__(file)
        self._where, self._weights_only, self._device_of = where, weights_only, device_of
        # ember.save pickles each tensor once, with bytes of its own. A crafted file can name one
        # stored buffer many times: each rebuild of it returns the first, so what a load builds stays
        # within the size of the file (6,000 rebuilds of 1 MiB asked for 6 GiB).
        self._rebuilt = {}

    def _rebuild(self, data, dtype, shape, requires_grad, device):
        from ._tensor import _rebuild

        key = (id(data), dtype, tuple(shape) if isinstance(shape, (list, tuple)) else shape, requires_grad, device)
        if key not in self._rebuilt:
            self._rebuilt[key] = (data, _rebuild(data, dtype, shape, requires_grad, self._device_of(device)))
        return self._rebuilt[key][1]  # the key's id(data) stays valid: data is kept beside the tensor

    def find_class(self, module, name):
        if (module, name) == ("ember._tensor", "_rebuild"):
            return self._rebuild
        if module == "ember._ember" and isinstance(getattr(_ember, name, None), _ember.dtype):
            return getattr(_ember, name)
        if self._weights_only and (module, name) not in _SAFE_GLOBALS:
            raise pickle.UnpicklingError(
                f"load: {self._where} names {module}.{name}, which weights_only=True does not load (it allows "
                "tensors, dtypes, devices and plain containers); pass weights_only=False only for a file you trust"
            )
        return super().find_class(module, name)


def load(f, map_location=None, weights_only=True):
    """Reads what ``ember.save`` wrote to ``f`` (a path or a binary file object), as ``torch.load``.

    ``map_location`` puts the tensors elsewhere: a device ("cpu", "cuda:0"), a dict from saved to wanted
    device strings, or a function of the saved device string. ``weights_only=True`` (PyTorch's default)
    refuses any Python class but tensors, dtypes, devices and plain containers, so a file from elsewhere
    cannot run code; ``False`` unpickles anything (only for files you trust). A file that is not
    ember's (a PyTorch zip, a truncated or corrupt one) raises ``ember.FormatError`` naming it."""
    if hasattr(f, "read"):
        where = f"file object {getattr(f, 'name', type(f).__name__)!r}"
        if isinstance(f, io.TextIOBase):  # its read() would fail decoding the bytes first
            raise TypeError(f"load: {where} must be opened in binary mode")
        data = f.read()
    else:
        path = _path(f, "load")
        where = f"'{path}'"
        try:
            # A device would be read until memory runs out (/dev/zero), a FIFO wait for a writer.
            if not stat.S_ISREG(os.stat(path).st_mode):
                raise _ember.IOError(f"load: {where} is not a regular file")
            with open(path, "rb") as file:
                data = file.read()
        except OSError as e:
            raise _ember.IOError(f"load: cannot read {where}: {e.strerror or e}") from None
    if not isinstance(data, bytes):
        raise TypeError(f"load: {where} must be opened in binary mode")
    header = len(_MAGIC) + 1
    if not data.startswith(_MAGIC):
        if data.startswith(_ZIP_MAGIC):
            raise _ember.FormatError(
                f"load: {where} is a PyTorch zip checkpoint (torch.save); ember reads files ember.save wrote. "
                "Move weights between the two with safetensors (ember.save_file / safetensors.torch)"
            )
        raise _ember.FormatError(f"load: {where} is not a file ember.save wrote ({len(data)} bytes, starting {data[:8]!r})")
    if len(data) < header or data[len(_MAGIC)] not in _READABLE_VERSIONS:
        version = data[len(_MAGIC)] if len(data) >= header else "none"
        raise _ember.FormatError(f"load: {where} has format version {version}; this ember reads versions "
                                 f"{', '.join(map(str, _READABLE_VERSIONS))}")
    pickled = data[header:]
    if data[len(_MAGIC)] == 2:
        if len(pickled) < 4:
            raise _ember.FormatError(f"load: {where} is truncated or corrupt ({len(data)} bytes, no checksum)")
        (stored,), pickled = struct.unpack("<I", pickled[:4]), pickled[4:]
        if zlib.crc32(pickled) != stored:
            raise _ember.FormatError(f"load: {where} is truncated or corrupt: its data fails the checksum (crc32 "
                                     f"{zlib.crc32(pickled):08x}, written as {stored:08x})")
    unpickler = _Unpickler(io.BytesIO(pickled), where, weights_only, _device_map(map_location))
    try:
        return unpickler.load()
    except pickle.UnpicklingError as e:
        if str(e).startswith("load: "):
            raise
        raise _ember.FormatError(f"load: {where} is truncated or corrupt ({e})") from None
    except _ember.Error as e:  # a tensor the file describes that ember cannot make here (a device, memory)
        raise type(e)(f"load: {where}: {e}") from None
    except (EOFError, ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError, MemoryError) as e:
        # pickle's MemoryError for a length no memory holds comes without a message
        detail = str(e) or ("a length it declares is larger than memory" if isinstance(e, MemoryError) else "")
        raise _ember.FormatError(f"load: {where} is truncated or corrupt ({type(e).__name__}: {detail})") from None
