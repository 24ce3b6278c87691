"""``ember.nn.Module`` and the layers: the Python class users subclass, the containers, and the built-in
layers, whose forward runs in ember's C++ modules.

A built-in layer (``Linear``, ``Conv2d``, ...) or model (``ResNet``, ``VisionTransformer``) is a
``_CppModule``: a Python ``Module`` that wraps one of ember's C++ modules and mirrors its parameters,
buffers and children, so the Python tree has the C++ tree's dotted names and the very same tensors
(an optimizer built from ``parameters()`` steps what the C++ forward reads, and a checkpoint of the C++
training program loads by name). Its forward is one C++ call, with the GIL released.
"""

import copy
import functools
import operator
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from .. import _ember
from .._ember import Tensor
from ..autograd import no_grad

__all__ = [
    "Module",
    "Parameter",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "RemovableHandle",
]


# ---- Parameter


class Parameter(Tensor):
    """A tensor that is a module's parameter: assigning one to a module attribute registers it, and
    it requires grad by default (``torch.nn.Parameter``).

    ``Parameter(data)`` shares ``data``'s elements (it is ``data.detach()`` marked as a leaf that
    requires grad)."""

    __module__ = "ember.nn"

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _ember.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be an ember.Tensor, got {type(data).__name__}")
        super().__init__(data)
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _wrap(cls, tensor):
        """A Parameter that is ``tensor`` itself (the same C++ tensor, requires_grad unchanged)."""
        p = Tensor.__new__(cls)
        _ember._init_handle(p, tensor)
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        rebuild, args = Tensor.__reduce_ex__(self, protocol)
        return (_rebuild_parameter, (rebuild, args, self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with no_grad():
            result = Parameter(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            result.grad = self.grad.detach().clone()
        memo[id(self)] = result
        return result


def _rebuild_parameter(rebuild, args, requires_grad):
    return Parameter(rebuild(*args).detach(), requires_grad)


# ---- hooks


class RemovableHandle:
    """What ``register_forward_hook`` and ``register_forward_pre_hook`` return: ``remove()`` takes the
    hook off (a no-op the second time). Also a context manager that removes it on exit."""

    _next_id = 0

    def __init__(self, hooks=None, cpp_handle=None):
        self._hooks = weakref.ref(hooks) if hooks is not None else None
        self._cpp = cpp_handle
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        """Takes the hook off."""
        if self._cpp is not None:
            self._cpp.remove()
        hooks = self._hooks() if self._hooks is not None else None
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _check_name(kind, name, module):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')


def _parse_to(args, kwargs):
    """(device, dtype, non_blocking) of Module.to's arguments, as Tensor.to takes them."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, _ember.dtype):
            dtype = a
        elif isinstance(a, (str, _ember.device)):
            device = _ember.device(a) if isinstance(a, str) else a
        elif isinstance(a, bool):
            non_blocking = a
        else:
            raise TypeError(f"to() received an invalid argument {a!r}: expected a device, a dtype or a tensor")
    if isinstance(device, str):
        device = _ember.device(device)
    if isinstance(dtype, str) and isinstance(getattr(_ember, dtype, None), _ember.dtype):
        dtype = getattr(_ember, dtype)  # "float64", as the factories take it
    if dtype is not None and not isinstance(dtype, _ember.dtype):
        raise TypeError(f"to(): dtype must be an ember.dtype (ember.float64, ...), got {dtype!r}")
    if device is not None and not isinstance(device, _ember.device):
        raise TypeError(f"to(): device must be an ember.device or a string, got {device!r}")
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
    return device, dtype, non_blocking


# ---- Module


class Module:
    """The base of layers and models (``torch.nn.Module``). Subclass it, assign ``Parameter``s,
    submodules and (through ``register_buffer``) buffers in ``__init__``, and define ``forward``::

        class Net(ember.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = ember.nn.Linear(4, 8)
                self.scale = ember.nn.Parameter(ember.ones(8))
                self.register_buffer("calls", ember.zeros((), dtype=ember.int64))

            def forward(self, x):
                return self.fc1(x).relu() * self.scale

    Calling the module runs ``forward`` with the forward hooks around it. Built-in layers may be
    children: their parameters appear under the same dotted names as in ember's C++ state dicts.
    """

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes no arguments: they belong to the subclass")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_bridge"] = None  # a weakref to this module's C++ stand-in while ZeRO-3 drives it

    def forward(self, *args, **kwargs):
        """The module's computation; subclasses define it (call the module, not forward)."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # -- calling

    def __call__(self, *args, **kwargs):
        bridge = self._bridge
        if bridge is not None and len(args) == 1 and not kwargs and isinstance(args[0], Tensor):
            cpp = bridge()
            if cpp is not None:
                return cpp(args[0])  # C++ hooks (ZeRO-3's gathering) around _bridge_forward
        if not self._forward_pre_hooks and not self._forward_hooks:
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def _bridge_forward(self, x):
        # The C++ stand-in's forward: the call it stands for (the arguments a wrapper stashed, or x).
        pending = self.__dict__.pop("_pending_call", None)
        args, kwargs = pending if pending is not None else ((x,), {})
        output = self._call_with_hooks(args, kwargs)
        if pending is not None:
            self.__dict__["_pending_output"] = output
            return _first_tensor(output)
        return output

    def register_forward_pre_hook(self, hook):
        """Calls ``hook(module, args)`` before each forward; a returned value replaces the arguments."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook):
        """Calls ``hook(module, args, output)`` after each forward; a returned value replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    # -- attributes

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            values = d.get(store)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(name, d, d["_buffers"], d["_modules"], d["_non_persistent_buffers_set"])
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' (ember.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(name, d, d["_parameters"], d["_buffers"], d["_non_persistent_buffers_set"])
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (ember.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (ember.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, ()):
                del d[store][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # -- registration

    def register_parameter(self, name, param):
        """Registers ``param`` (a ``Parameter`` or None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name, self)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' (ember.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Registers ``tensor`` (or None) as a buffer: state that is saved and moved with the module but
        not trained (running statistics). ``persistent=False`` keeps it out of the state dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name, self)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (ember.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Registers ``module`` (or None) as the child ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name("module", name, self)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        """The descendant at the dotted path ``target`` ("" is the module itself)."""
        module = self
        if target:
            for part in target.split("."):
                if part not in module._modules or module._modules[part] is None:
                    raise AttributeError(f"{type(module).__name__} has no submodule '{part}' (looking up '{target}')")
                module = module._modules[part]
        return module

    def get_parameter(self, target):
        """The parameter at the dotted path ``target``."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._parameters:
            raise AttributeError(f"{type(module).__name__} has no parameter '{name}'")
        return module._parameters[name]

    def get_buffer(self, target):
        """The buffer at the dotted path ``target``."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._buffers:
            raise AttributeError(f"{type(module).__name__} has no buffer '{name}'")
        return module._buffers[name]

    # -- traversal

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) of this module ("") and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        """This module and every descendant, depth first."""
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        """(name, module) of the direct children."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        """The direct children."""
        for _, module in self.named_children():
            yield module

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None:
                    continue
                if remove_duplicate:
                    key = _ember._impl_id(value)
                    if key in seen:
                        continue
                    seen.add(key)
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) of this module's parameters, then its descendants' (a shared one once)."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """The parameters, as ``named_parameters`` orders them."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, buffer) of this module's buffers, then its descendants'."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """The buffers, as ``named_buffers`` orders them."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes and gradients

    def train(self, mode=True):
        """Sets training mode (``mode``) or evaluation mode on this module and every descendant."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.__dict__["training"] = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """``train(False)``: dropout off, batch norm on its running statistics."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Sets ``requires_grad`` on every parameter (freezing or unfreezing)."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Sets every parameter's gradient to None (default), or zeroes it in place."""
        for p in self.parameters():
            grad = p.grad
            if grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                grad.zero_()

    # -- moving and casting

    def _apply_to_tensors(self, fn):
        # Each tensor is rebound in place (t.data = new): identity is kept, so C++ layers, optimizers and
        # other holders see the moved tensor, as nn::Module::to does.
        with no_grad():
            for module in self.modules():
                for store in (module._parameters, module._buffers):
                    for t in store.values():
                        if t is None:
                            continue
                        new = fn(t)
                        if new is not t and not new.is_same(t):
                            grad = t.grad  # set_data drops a gradient of another layout: converted too, as PyTorch
                            t.data = new
                            if grad is not None and t.grad is None:
                                t.grad = fn(grad)
        return self

    def to(self, *args, **kwargs):
        """Moves and/or casts every parameter and buffer in place: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)``, ``to(tensor)``. A dtype casts the floating tensors only."""
        device, dtype, non_blocking = _parse_to(args, dict(kwargs))

        def convert(t):
            if device is not None and t.device != device:
                t = t.to(device, non_blocking=non_blocking)
            if dtype is not None and t.is_floating_point() and t.dtype != dtype:
                t = t.to(dtype)
            return t

        return self._apply_to_tensors(convert)

    def cpu(self):
        """Moves every parameter and buffer to the host."""
        return self.to("cpu")

    def cuda(self, device=None):
        """Moves every parameter and buffer to a GPU (cuda:0 by default)."""
        if device is None:
            device = "cuda:0"
        elif isinstance(device, int):
            device = f"cuda:{device}"
        return self.to(device)

    def float(self):
        """Casts the floating parameters and buffers to float32."""
        return self.to(_ember.float32)

    def double(self):
        """Casts the floating parameters and buffers to float64."""
        return self.to(_ember.float64)

    def half(self):
        """Casts the floating parameters and buffers to float16."""
        return self.to(_ember.float16)

    def bfloat16(self):
        """Casts the floating parameters and buffers to bfloat16."""
        return self.to(_ember.bfloat16)

    def apply(self, fn):
        """Calls ``fn(module)`` on every descendant, then on this module (initialisation)."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- state

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name, in registration order; the tensors share
        storage with the module's (detached unless ``keep_vars``)."""
        if args:
            raise TypeError("state_dict() takes keyword arguments only (destination=, prefix=, keep_vars=)")
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies values into the existing parameters and buffers (converting dtype and device). With
        ``strict``, missing and unexpected keys are errors; a shape mismatch always is. Every problem is
        reported in one ``ember.ValueError``, and nothing is copied when there is any. Returns
        ``(missing_keys, unexpected_keys)``."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expects a dict-like state dict, got {type(state_dict).__name__}")
        if assign:
            raise NotImplementedError("load_state_dict(assign=True) is not supported: values are copied in place")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems = []
        sources = {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                src = _ember.tensor(src)
            if tuple(src.shape) != tuple(target.shape):
                problems.append(
                    f"size mismatch for {key}: copying a param with shape {list(src.shape)} from checkpoint, "
                    f"the shape in current model is {list(target.shape)}."
                )
            sources[key] = src
        if strict:
            if unexpected:
                problems.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                problems.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if problems:
            raise _ember.ValueError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(problems))
        with no_grad():
            for key, src in sources.items():
                own[key].copy_(src)
        return _IncompatibleKeys(missing, unexpected)

    # -- printing

    def extra_repr(self):
        """The settings ``repr`` shows in parentheses; override it."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, module in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(module), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _remove_from(name, *stores):
    for store in stores:
        if name in store:
            if isinstance(store, set):
                store.discard(name)
            else:
                del store[name]


def _first_tensor(output):
    """The first tensor of a forward's output (what a C++ wrapper can carry)."""
    if isinstance(output, Tensor):
        return output
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        for item in output:
            t = _first_tensor(item)
            if t is not None:
                return t
    return None


# ---- containers


class _IndexedModules(Module):
    """What Sequential and ModuleList share: children in order, added at the end named by their index."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Adds module at the end, named by its index."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        """Appends each of modules."""
        for m in modules:
            self.append(m)
        return self


class Sequential(_IndexedModules):
    """Runs its children in order: ``Sequential(a, b, c)(x)`` is ``c(b(a(x)))``. Children are named "0",
    "1", ... (or by the keys of an OrderedDict)."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        """input through every child in order."""
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_checked_index(idx, len(self._modules))]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[_checked_index(idx, len(self._modules))]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        for key in keys[idx] if isinstance(idx, slice) else [keys[_checked_index(idx, len(keys))]]:
            del self._modules[key]


def _checked_index(idx, n):
    try:
        idx = operator.index(idx)  # an int, not a float that int() would cut (PyTorch refuses [0.7] too)
    except TypeError:
        raise TypeError(f"container indices must be integers or slices, got {type(idx).__name__}") from None
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a container of {n} entries")
    return idx % n


class ModuleList(_IndexedModules):
    """Holds modules by index ("0", "1", ...), with no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_checked_index(idx, len(self._modules)))]

    def __setitem__(self, idx, module):
        setattr(self, str(_checked_index(idx, len(self._modules))), module)

    def __iadd__(self, modules):
        return self.extend(modules)

    def insert(self, index, module):
        """Inserts module before index."""
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m


class _NamedEntries:
    """The dict interface that ModuleDict and ParameterDict share, over one of the module's stores."""

    _store = None  # "_modules" or "_parameters"

    def __init__(self, entries=None):
        Module.__init__(self)
        if entries is not None:
            self.update(entries)

    def _entries(self):
        return self.__dict__[self._store]

    def __getitem__(self, key):
        return self._entries()[key]

    def __delitem__(self, key):
        del self._entries()[key]

    def __len__(self):
        return len(self._entries())

    def __iter__(self):
        return iter(self._entries())

    def __contains__(self, key):
        return key in self._entries()

    def keys(self):
        """The names."""
        return self._entries().keys()

    def values(self):
        """The entries."""
        return self._entries().values()

    def items(self):
        """(name, entry) pairs."""
        return self._entries().items()

    def update(self, entries):
        """Adds (name, entry) pairs from a mapping or an iterable."""
        items = entries.items() if hasattr(entries, "items") else entries
        for key, value in items:
            self[key] = value


class ModuleDict(_NamedEntries, Module):
    """Holds modules by name, as a dict, with no forward of its own."""

    _store = "_modules"

    def __setitem__(self, key, module):
        self.add_module(key, module)


def _as_parameter(value, container):
    """value as a Parameter: a tensor becomes one (requiring grad), as in PyTorch's parameter containers."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"{container}: expects tensors or Parameters, got {type(value).__name__}")


class ParameterList(Module):
    """Holds parameters by index ("0", "1", ...), so that parameters(), the state dict and to() see them;
    a tensor given to it becomes a Parameter."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self._parameters.values())[idx])
        return self._parameters[str(_checked_index(idx, len(self)))]

    def __setitem__(self, idx, value):
        self.register_parameter(str(_checked_index(idx, len(self))), _as_parameter(value, "ParameterList"))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        """Adds value at the end, named by its index."""
        self.register_parameter(str(len(self)), _as_parameter(value, "ParameterList"))
        return self

    def extend(self, values):
        """Appends each of values."""
        for v in values:
            self.append(v)
        return self


class ParameterDict(_NamedEntries, Module):
    """Holds parameters by name, as a dict; a tensor given to it becomes a Parameter."""

    _store = "_parameters"

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_parameter(value, "ParameterDict"))


# ---- the C++ side


class _CppModule(Module):
    """A Python module wrapping one of ember's C++ modules (see the file's description). Its
    parameters and buffers are the C++ module's and cannot be replaced (assign values in place:
    ``copy_``, ``.data =``, ``load_state_dict``); a child can be, by another built-in module
    (``model.fc = nn.Linear(512, 3)``); its forward and forward hooks run in C++."""

    def __init_subclass__(cls, **kwargs):
        # The outermost constructor call of a built-in layer or model is recorded: deepcopy builds
        # the C++ module again that way (C++ modules cannot be copied) and copies the values in.
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def recording_init(self, *args, **kw):
            outermost = "_ctor" not in self.__dict__
            if outermost:
                self.__dict__["_ctor"] = None
            init(self, *args, **kw)
            if outermost:
                self.__dict__["_ctor"] = (type(self), args, kw)

        cls.__init__ = recording_init

    def __deepcopy__(self, memo):
        ctor = self.__dict__.get("_ctor")
        if not ctor:
            raise NotImplementedError(f"deepcopy of {type(self).__name__}: this part of a built-in model is copied with "
                                      "the whole model")
        cls, args, kwargs = ctor
        state = _ember.default_generator.get_state()  # building draws initial values: leave the stream as it was
        try:
            new = cls(*copy.deepcopy(args, memo), **copy.deepcopy(kwargs, memo))
        finally:
            _ember.default_generator.set_state(state)
        memo[id(self)] = new
        with no_grad():
            for store in ("_parameters", "_buffers"):
                mine = dict(self._named_members(store, "", True, False))
                for name, t in new._named_members(store, "", True, False):
                    src = mine[name]
                    t.data = src.detach().clone()
                    if store == "_parameters":
                        t.requires_grad_(src.requires_grad)
                        if src.grad is not None:
                            t.grad = src.grad.detach().clone()
        new.train(self.training)
        for module_name, module in self.named_modules():
            target = new.get_submodule(module_name)
            for key, value in module.__dict__.items():
                if key not in target.__dict__:
                    target.__dict__[key] = copy.deepcopy(value, memo)
        return new

    def __init__(self, handle, _memo=None):
        Module.__init__(self)
        d = self.__dict__
        d["_cpp"] = handle
        memo = {} if _memo is None else _memo
        for name, t in handle.direct_parameters():
            key = _ember._impl_id(t)
            if key not in memo:
                memo[key] = Parameter._wrap(t)
            d["_parameters"][name] = memo[key]
        for name, t in handle.direct_buffers():
            d["_buffers"][name] = memo.setdefault(_ember._impl_id(t), t)
        for name, child in handle.named_children():
            d["_modules"][name] = _wrap_cpp(child, memo)
        config = handle.config()
        d["_config_keys"] = frozenset(config)
        d.update(config)
        d["training"] = handle.training

    def forward(self, input):
        """The C++ module's forward (the GIL is released while it runs)."""
        return self._cpp(input)

    def __call__(self, *args, **kwargs):
        # Hooks registered through this wrapper live in C++ and run inside the C++ call.
        return self.forward(*args, **kwargs)

    def _get_name(self):
        cls = type(self)
        return self._cpp.type_name() if cls in (_CppSequential, _CppModuleList) else cls.__name__

    def extra_repr(self):
        return self._cpp.extra_repr()

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self._cpp.train(mode)  # the C++ tree, Python modules below it included
        for module in self.modules():
            if isinstance(module, _CppModule):
                module.__dict__["training"] = mode
            elif module is not self:
                module.train(mode)
        return self

    def __setattr__(self, name, value):
        d = self.__dict__
        if name == "training":
            self.train(bool(value))
            return
        if name in d["_modules"] and isinstance(value, Module):
            self._replace_child(name, value)
            return
        if name in d["_parameters"] or name in d["_buffers"] or name in d["_modules"] or isinstance(value, (Parameter, Module)):
            raise NotImplementedError(
                f"{type(self).__name__}.{name}: the parameters and buffers of ember's C++ modules are fixed, and a "
                "child can only be replaced by another built-in module; change values in place (.copy_(), "
                ".data = ..., load_state_dict) or build the layer with the sizes you need"
            )
        if name in d["_config_keys"]:
            self._cpp.set_config(name, value)
            d[name] = value
            return
        object.__setattr__(self, name, value)

    def _replace_child(self, name, module):
        """``self.name = module`` for a child of the C++ module (``resnet.fc = nn.Linear(512, 3)``): the C++
        forward calls the new one. It must be a built-in module, of the type the forward calls there."""
        if not isinstance(module, _CppModule):
            raise NotImplementedError(
                f"{type(self).__name__}.{name}: a child of ember's C++ modules can be replaced by a built-in module "
                f"(ember.nn's layers and models), not by the Python module {type(module).__name__}; to run Python "
                "code there, write the model as a Python Module"
            )
        self._cpp.replace_module(name, module._cpp)
        self.__dict__["_modules"][name] = module

    def __delattr__(self, name):
        d = self.__dict__
        if name in d["_parameters"] or name in d["_buffers"] or name in d["_modules"]:
            # The C++ forward would go on using it while the state dict and parameters() dropped it.
            raise NotImplementedError(
                f"{type(self).__name__}.{name}: the parameters, buffers and children of ember's C++ modules cannot "
                "be deleted (the C++ forward uses them); replace a child by nn.Identity() instead"
            )
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        raise NotImplementedError(f"{type(self).__name__}: ember's C++ modules take no new parameters from Python")

    def register_buffer(self, name, tensor, persistent=True):
        raise NotImplementedError(f"{type(self).__name__}: ember's C++ modules take no new buffers from Python")

    def add_module(self, name, module):
        raise NotImplementedError(f"{type(self).__name__}: ember's C++ modules take no new children from Python")

    register_module = add_module

    def register_forward_pre_hook(self, hook):
        """Calls ``hook(module, args)`` before each forward, wherever the module is called from (inside
        a C++ model too); C++ hooks observe only, so a hook must return None."""
        ref = weakref.ref(self)

        def call(x):
            if hook(ref(), (x,)) is not None:
                raise TypeError(f"a forward pre-hook of {type(self).__name__} (an ember C++ module) must return None")

        return RemovableHandle(cpp_handle=self._cpp.register_forward_pre_hook(call))

    def register_forward_hook(self, hook):
        """Calls ``hook(module, args, output)`` after each forward, wherever the module is called from
        (inside a C++ model too); C++ hooks observe only, so a hook must return None."""
        ref = weakref.ref(self)

        def call(x, y):
            if hook(ref(), (x,), y) is not None:
                raise TypeError(f"a forward hook of {type(self).__name__} (an ember C++ module) must return None")

        return RemovableHandle(cpp_handle=self._cpp.register_forward_hook(call))

    def set_activation_checkpointing(self, on=True):
        """Recomputes this module's activations in backward instead of keeping them (nn/checkpoint.h)."""
        self._cpp.set_activation_checkpointing(on)
        return self

    def cpp_state_dict_keys(self):
        """The keys of the C++ module's own state dict (sorted): what its checkpoints hold."""
        return sorted(self._cpp.state_dict().keys())


class _FixedLength:
    """The container edits a C++ container cannot follow (its forward keeps its own list): refused, as
    append is (add_module); a child may still be replaced by index."""

    def __delitem__(self, idx):
        raise NotImplementedError(f"{type(self).__name__}: ember's C++ containers keep their length; replace a child "
                                  "by nn.Identity() instead of deleting it")

    def insert(self, index, module):
        """Refused: a C++ container keeps its length."""
        raise NotImplementedError(f"{type(self).__name__}: ember's C++ containers take no new children from Python")


class _CppSequential(_FixedLength, _CppModule, Sequential):
    """A C++ Sequential (a ResNet stage): indexable, its forward in C++."""

    forward = _CppModule.forward
    __call__ = _CppModule.__call__


class _CppModuleList(_FixedLength, _CppModule, ModuleList):
    """A C++ ModuleList (a ViT's blocks): indexable, no forward of its own."""

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward: call its modules")


_CPP_CLASSES = {"Sequential": _CppSequential, "ModuleList": _CppModuleList}


def _register_cpp_class(name):
    """A class decorator: modules of the C++ type `name` are wrapped in this class."""

    def register(cls):
        _CPP_CLASSES[name] = cls
        return cls

    return register


def _cpp_class(name):
    cls = _CPP_CLASSES.get(name)
    if cls is None:
        cls = type(name, (_CppModule,), {"__module__": "ember.nn", "__doc__": f"ember's C++ {name}, a part of a built-in model."})
        _CPP_CLASSES[name] = cls
    return cls


def _wrap_cpp(handle, memo=None):
    """The Python module of a C++ module handle (its class chosen by the C++ type's name)."""
    memo = {} if memo is None else memo
    key = ("module", id(handle))
    if key in memo:
        return memo[key]
    cls = _cpp_class(handle.type_name())
    module = cls.__new__(cls)
    memo[key] = module
    _CppModule.__init__(module, handle, memo)
    return module


def _cpp_handle_of(module):
    """The C++ module that stands for ``module`` in a C++ wrapper (DDP, ZeRO): a built-in's own, or a
    bridge mirroring a Python module's tree (same names, same tensors) whose forward calls back."""
    if isinstance(module, _CppModule):
        return module._cpp, []
    bridges = []

    def build(m):
        if isinstance(m, _CppModule):
            return m._cpp
        bridge = _ember._python_module_bridge(m, type(m).__name__)
        bridges.append((m, bridge))
        for name, p in m._parameters.items():
            if p is not None:
                bridge.add_parameter(name, p)
        for name, b in m._buffers.items():
            if b is not None:
                bridge.add_buffer(name, b)
        for name, child in m._modules.items():
            if child is not None:
                bridge.add_child(name, build(child))
        return bridge

    return build(module), bridges


def _route_through_bridges(bridges):
    """Makes each Python module's calls go through its C++ stand-in (ZeRO-3 gathers parameters in the
    C++ forward hooks)."""
    for module, bridge in bridges:
        module.__dict__["_bridge"] = weakref.ref(bridge)
