"""Neural network modules (``torch.nn``): ``Module`` to subclass, ``Parameter``, the containers, the
built-in layers (their forward in ember's C++), ``functional``, ``init``, ``utils`` (gradient
clipping), ``models`` (ResNet, ViT, ...) and ``parallel`` (DistributedDataParallel)."""

from . import functional, init, models, utils
from .composed_layers import *  # noqa: F401,F403
from .composed_layers import __all__ as _composed_layer_names
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layer_names
from .modules import Module, ModuleDict, ModuleList, Parameter, ParameterDict, ParameterList, RemovableHandle, Sequential
from .recurrent import *  # noqa: F401,F403
from .recurrent import __all__ as _recurrent_names
from .transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = ["Module", "ModuleDict", "ModuleList", "Parameter", "ParameterDict", "ParameterList", "RemovableHandle",
           "Sequential", "TransformerEncoder", "TransformerEncoderLayer", "functional", "init", "models", "parallel",
           "utils"] + list(_layer_names) + list(_composed_layer_names) + list(_recurrent_names)


def __getattr__(name):
    # ember.nn.parallel imports ember.distributed: loaded on first use.
    if name == "parallel":
        import importlib

        return importlib.import_module(".parallel", __name__)
    raise AttributeError(f"module 'ember.nn' has no attribute '{name}'")
