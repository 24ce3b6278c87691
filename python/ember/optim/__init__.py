"""Optimizers (``torch.optim``): SGD, Adam, AdamW and LAMB, each one of ember's C++ optimizers (optim/*.h)
whose step updates every parameter of a group in one multi-tensor kernel, without reading anything
back to the host; RMSprop and Adagrad, written in Python (python_optimizers.py); and ``Optimizer``,
the base to write your own as in PyTorch: a subclass that passes ``defaults`` and defines ``step()``
over ``self.param_groups`` and ``self.state`` (a dict per parameter) works with ember's schedulers,
``GradScaler`` and checkpoints.

Parameters come as an iterable of tensors or of param-group dicts, with PyTorch's keyword names
(``lr``, ``momentum``, ``betas``, ``eps``, ``weight_decay``, ``nesterov``, ``amsgrad``).
``param_groups`` is a list of dict-like views of the C++ groups: ``group["lr"] = x`` changes what the
next step uses (schedulers written in Python work), and keys ember does not know are kept beside.
``state_dict()`` has PyTorch's layout (``{"state": {i: {...}}, "param_groups": [...]}``).
"""

import inspect
from collections import defaultdict
from collections.abc import Mapping, MutableMapping

from .. import _ember
from .._ember import Tensor
from ..autograd import enable_grad

__all__ = ["Adagrad", "Adam", "AdamW", "LAMB", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]

_BOOL_OPTIONS = ("nesterov", "amsgrad")


def _to_cpp_options(options, known, written_in_python=False):
    """(C++ options, Python-only extras) of a PyTorch-style group dict (without "params"). For an optimizer
    written in Python, only the keys in ``known`` go to C++."""
    cpp, extra = {}, {}
    for key, value in options.items():
        if key == "params":
            continue
        if key == "betas" and not written_in_python:
            if not (isinstance(value, (tuple, list)) and len(value) == 2):
                raise TypeError(f"betas must be a pair (beta1, beta2), got {value!r}")
            cpp["beta1"], cpp["beta2"] = _number("betas", value[0]), _number("betas", value[1])
        elif key in known or key == "initial_lr":
            cpp[key] = _number(key, value)
        else:
            extra[key] = value
    return cpp, extra


def _number(key, value):
    """A hyperparameter as the float C++ keeps (a one-element tensor gives its value)."""
    if isinstance(value, Tensor):
        value = value.item()
    if not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"{key} must be a number, got {value!r}")
    return float(value)


def _from_cpp_options(options):
    """A C++ group's options under PyTorch's names (betas as a pair, booleans as bools)."""
    out = {}
    for key, value in options.items():
        if key in ("beta1", "beta2"):
            continue
        out[key] = bool(value) if key in _BOOL_OPTIONS else value
    if "beta1" in options:
        out["betas"] = (options["beta1"], options["beta2"])
    return out


class _ParamGroup(MutableMapping):
    """One param group: a dict-like view of the C++ group's hyperparameters (writes go through to
    the next step), its parameters, and the keys ember does not know (kept in Python)."""

    def __init__(self, optimizer, index, params, extra):
        self._optimizer = optimizer
        self._index = index
        self._params = params
        self._extra = extra

    def _options(self):
        options = _from_cpp_options(self._optimizer._cpp.group_options(self._index))
        shown = self._optimizer._shown
        return options if shown is None else {k: v for k, v in options.items() if k in shown}

    def __getitem__(self, key):
        if key == "params":
            return self._params
        options = self._options()
        if key in options:
            return options[key]
        return self._extra[key]

    def __setitem__(self, key, value):
        cpp = self._optimizer._cpp
        if key == "params":
            raise TypeError("a param group's params are fixed; add parameters with add_param_group")
        if key == "betas" and self._optimizer._shown is None:
            beta1, beta2 = value
            cpp.set_group_option(self._index, "beta1", float(beta1))
            cpp.set_group_option(self._index, "beta2", float(beta2))
        elif key in self._optimizer._known or key == "initial_lr":
            if isinstance(value, Tensor):
                value = value.item()
            cpp.set_group_option(self._index, key, float(value))
        else:
            self._extra[key] = value

    def __delitem__(self, key):
        if key in self._extra:
            del self._extra[key]
        else:
            raise KeyError(f"{key!r} is one of ember's hyperparameters and cannot be removed")

    def __iter__(self):
        yield "params"
        yield from self._options()
        yield from self._extra

    def __len__(self):
        return 1 + len(self._options()) + len(self._extra)

    def __repr__(self):
        return repr({k: (f"<{len(self._params)} tensors>" if k == "params" else self[k]) for k in self})


class Optimizer:
    """The base of the optimizers (``torch.optim.Optimizer``). ember's own set ``_kind`` and are a C++
    optimizer of that kind over the param groups. A subclass written in Python (no ``_kind``) passes its
    PyTorch-named ``defaults`` and defines ``step()``, reading ``group["lr"]`` and the other
    hyperparameters from ``self.param_groups`` and keeping per-parameter tensors in ``self.state[p]``.
    Its groups then live in a C++ optimizer that never steps (so that ember's schedulers set their lr and
    GradScaler unscales their gradients) with the other hyperparameters beside them in Python."""

    _kind = None

    def __init__(self, params, defaults):
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = dict(defaults)
        first, rest = groups[0], groups[1:]
        written_in_python = self._kind is None
        # A Python optimizer's groups: only lr goes to the C++ holder (schedulers set it there).
        known = (frozenset({"lr"}) & frozenset(self.defaults)) if written_in_python else _KNOWN[self._kind]
        default_options, default_extra = _to_cpp_options(self.defaults, known, written_in_python)
        self._cpp = _ember._make_optimizer(self._kind or "SGD", self._param_list(first), default_options)
        self._known = known if written_in_python else frozenset(self._cpp.defaults())
        self._shown = known if written_in_python else None
        self._python_state = defaultdict(dict) if written_in_python else None
        self._default_extra = default_extra
        self._groups = []
        self._attach_group(first, index=0)
        for group in rest:
            self.add_param_group(group)

    @classmethod
    def _from_cpp(cls, cpp, params_by_group, owner):
        """A Python view of a C++ optimizer another object owns (ZeRO's inner optimizer)."""
        self = cls.__new__(cls)
        self._cpp = cpp
        self._owner = owner  # keeps the C++ owner alive
        self._known = frozenset(cpp.defaults())
        self._shown = None
        self._python_state = None
        self.defaults = _from_cpp_options(cpp.defaults())
        self._default_extra = {}
        self._groups = [_ParamGroup(self, g, params, {}) for g, params in enumerate(params_by_group)]
        return self

    @staticmethod
    def _param_list(group):
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
        return params

    def _attach_group(self, group, index, options=None, extra=None):
        if options is None:
            options, extra = _to_cpp_options(group, self._known, self._shown is not None)
            for key, value in options.items():
                self._cpp.set_group_option(index, key, value)
        merged_extra = dict(self._default_extra)
        merged_extra.update(extra)
        self._groups.append(_ParamGroup(self, index, self._param_list(group), merged_extra))

    def add_param_group(self, param_group):
        """Adds a group (a dict with "params" and any hyperparameters; the rest from the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        # Options converted (and so checked) before the C++ group exists: a bad value leaves no group behind.
        options, extra = _to_cpp_options(param_group, self._known, self._shown is not None)
        self._cpp.add_param_group(self._param_list(param_group), options)
        self._attach_group(param_group, len(self._groups), options, extra)

    @property
    def param_groups(self):
        """The param groups: dict-like views (``group["lr"] = x`` takes effect at the next step)."""
        return self._groups

    @property
    def state(self):
        """Per-parameter state by parameter object: {param: {"exp_avg": ..., "step": ...}}. An optimizer
        written in Python fills it in its step: ``self.state[p]`` is that parameter's dict (empty at first)."""
        if self._python_state is not None:
            return self._python_state
        out = {}
        index = 0
        for group in self._groups:
            for p in group["params"]:
                st = self._cpp.state(index)
                if st:
                    out[p] = dict(st)
                index += 1
        return out

    def step(self, closure=None):
        """Updates every parameter that has a gradient (one C++ kernel per group). With ``closure``,
        calls it first (with grad enabled) and returns its loss."""
        if self._python_state is not None:
            raise NotImplementedError(f"{type(self).__name__}: an optimizer written in Python defines step()")
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._cpp.step()
        return loss

    def zero_grad(self, set_to_none=True):
        """Sets every gradient to None (default), or zeroes it in place."""
        self._cpp.zero_grad(set_to_none)

    def state_dict(self):
        """{"state": {index: {name: tensor}}, "param_groups": [{hyperparameters, "params": [indices]}]},
        PyTorch's layout (the tensors are host copies; an optimizer written in Python gives its own
        state tensors, as PyTorch does)."""
        if self._python_state is not None:
            return self._python_state_dict()
        flat = self._cpp.state_dict()
        state = {}
        groups = [dict() for _ in self._groups]
        for key, t in flat.items():
            kind, idx, rest = key.split(".", 2)
            i = int(idx)
            if kind == "state":
                state.setdefault(i, {})[rest] = t
            elif rest == "params":
                groups[i]["params"] = t.tolist()
            else:
                groups[i][rest] = t.item()
        param_groups = []
        for g, raw in enumerate(groups):
            params = raw.pop("params")
            entry = _from_cpp_options(raw)
            entry.update(self._groups[g]._extra)
            entry["params"] = params
            param_groups.append(entry)
        return {"state": state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Restores a state dict of ``state_dict()``'s layout (from an optimizer of the same kind over
        parameters of the same shapes); ``ember.ValueError`` naming the entry otherwise."""
        if not isinstance(state_dict, Mapping) or not {"state", "param_groups"} <= set(state_dict):
            raise TypeError(f"{type(self).__name__}.load_state_dict: expects a dict with 'state' and 'param_groups', "
                            f"got {type(state_dict).__name__}")
        if self._python_state is not None:
            return self._load_python_state_dict(state_dict)
        # Another kind's hyperparameters (SGD's momentum in a dict loaded into Adam) would be kept as
        # extras and its state continued by the wrong update: refused, naming them.
        foreign = set().union(*_KNOWN.values()) - self._known - {"beta1", "beta2"}
        for g, group in enumerate(state_dict["param_groups"]):
            theirs = sorted(k for k in group if k in foreign or (k == "betas" and "beta1" not in self._known))
            if theirs:
                raise _ember.ValueError(f"{type(self).__name__}.load_state_dict: param group {g} has {', '.join(theirs)}, "
                                        f"which {type(self).__name__} does not take: the state dict is another "
                                        "optimizer's")
        flat = {}
        for i, entries in state_dict["state"].items():
            for name, t in entries.items():
                flat[f"state.{_state_index(i)}.{name}"] = t if isinstance(t, Tensor) else _ember.tensor(t, dtype=_ember.float64)
        extras = []
        for g, group in enumerate(state_dict["param_groups"]):
            options, extra = _to_cpp_options(group, self._known)
            extras.append(extra)
            for key, value in options.items():
                flat[f"param_groups.{g}.{key}"] = _ember.tensor(value, dtype=_ember.float64)
            flat[f"param_groups.{g}.params"] = _ember.tensor(list(group["params"]), dtype=_ember.int64)
        self._cpp.load_state_dict(flat)
        for group, extra in zip(self._groups, extras):
            group._extra.update(extra)

    def _indexed_params(self):
        return [p for group in self._groups for p in group["params"]]

    def _python_state_dict(self):
        index = {id(p): i for i, p in enumerate(self._indexed_params())}
        state = {index[id(p)]: dict(entries) for p, entries in self._python_state.items() if entries}
        param_groups = []
        for group in self._groups:
            entry = {k: group[k] for k in group if k != "params"}
            entry["params"] = [index[id(p)] for p in group["params"]]
            param_groups.append(entry)
        return {"state": state, "param_groups": param_groups}

    def _load_python_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self._groups):
            raise _ember.ValueError(f"{type(self).__name__}.load_state_dict: {len(groups)} param groups for an "
                                    f"optimizer of {len(self._groups)}")
        for g, (saved, group) in enumerate(zip(groups, self._groups)):
            if len(saved["params"]) != len(group["params"]):
                raise _ember.ValueError(f"{type(self).__name__}.load_state_dict: param group {g} holds "
                                        f"{len(saved['params'])} parameters, this optimizer's {len(group['params'])}")
        params = self._indexed_params()
        state = {}
        for i, entries in state_dict["state"].items():
            i = _state_index(i)
            if not 0 <= i < len(params):
                raise _ember.ValueError(f"{type(self).__name__}.load_state_dict: state of parameter {i}, but the "
                                        f"optimizer has {len(params)}")
            p = params[i]
            state[p] = {name: _placed_like(value, p, name) for name, value in entries.items()}
        for saved, group in zip(groups, self._groups):
            for key, value in saved.items():
                if key != "params":
                    group[key] = value
        self._python_state.clear()
        self._python_state.update(state)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for g, group in enumerate(self._groups):
            lines.append(f"Parameter Group {g}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        return "\n".join(lines) + "\n)"


def _state_index(key):
    """A state dict's parameter index (an int, or its decimal text after a round trip through JSON)."""
    if isinstance(key, int) and not isinstance(key, bool) or isinstance(key, str) and key.isdigit():
        return int(key)
    raise _ember.ValueError(f"Optimizer.load_state_dict: state key {key!r} is not a parameter index")


def _placed_like(value, param, name):
    """A loaded state entry on its parameter's device; floating tensors in its dtype, except the step count
    (PyTorch's rule for loading optimizer state)."""
    if not isinstance(value, Tensor):
        return value
    if value.is_floating_point() and name != "step":
        return value.to(device=param.device, dtype=param.dtype)
    return value.to(device=param.device)


_KNOWN = {
    "SGD": frozenset({"lr", "momentum", "dampening", "weight_decay", "nesterov"}),
    "Adam": frozenset({"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"}),
    "AdamW": frozenset({"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"}),
    "LAMB": frozenset({"lr", "beta1", "beta2", "eps", "weight_decay"}),
}


def _refuse(name, value, default, kind):
    if value != default:
        raise NotImplementedError(f"{kind}: {name}={value!r} is not supported by ember's optimizer")


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay
    (``torch.optim.SGD``; PyTorch's formulas, ``momentum_buffer`` state)."""

    _kind = "SGD"

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        _refuse("maximize", maximize, False, "SGD")
        _refuse("differentiable", differentiable, False, "SGD")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov))


class Adam(Optimizer):
    """Adam (optionally AMSGrad) with L2 weight decay added to the gradient (``torch.optim.Adam``)."""

    _kind = "Adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None):
        _refuse("maximize", maximize, False, "Adam")
        _refuse("differentiable", differentiable, False, "Adam")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))


class AdamW(Optimizer):
    """Adam with decoupled weight decay, lr * weight_decay * w (``torch.optim.AdamW``)."""

    _kind = "AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        _refuse("maximize", maximize, False, "AdamW")
        _refuse("differentiable", differentiable, False, "AdamW")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))


class LAMB(Optimizer):
    """LAMB (You et al., 2020): Adam's update with decoupled weight decay, scaled per parameter by the
    trust ratio ||w|| / ||update|| (apex's FusedLAMB defaults)."""

    _kind = "LAMB"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=1e-2):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))


_KIND_CLASSES = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW, "LAMB": LAMB}


def _spec_of_optimizer(optimizer_class, kwargs):
    """(C++ kind, C++ options) of an ember.optim class and its keyword arguments: what the wrappers that
    build their optimizer in C++ (ZeRO, DataParallel, TrainingPrecision) build it from."""
    kind = getattr(optimizer_class, "_kind", None)
    if kind is None:
        raise TypeError(f"expected an ember.optim optimizer class (SGD, Adam, AdamW, LAMB), got {optimizer_class!r}")
    bound = inspect.signature(optimizer_class.__init__).bind(None, None, **kwargs)
    bound.apply_defaults()
    named = {k: v for k, v in bound.arguments.items() if k in _KNOWN[kind] or k == "betas"}
    options, _ = _to_cpp_options(named, _KNOWN[kind])
    return kind, options


def _wrap_cpp_optimizer(cpp, owner):
    """An Optimizer over a C++ optimizer that ``owner`` built and keeps (for param_groups, schedulers)."""
    groups = [cpp.group_params(g) for g in range(cpp.num_groups())]
    return Optimizer._from_cpp(cpp, groups, owner)

from .python_optimizers import Adagrad, RMSprop  # noqa: E402  (they need Optimizer)
from . import lr_scheduler  # noqa: E402  (it needs Optimizer)
