"""Learning-rate schedulers (``torch.optim.lr_scheduler``). StepLR, MultiStepLR, CosineAnnealingLR,
LinearLR, OneCycleLR and SequentialLR are ember's C++ schedulers (optim/lr_scheduler.h), closed forms
of the epoch count that set the C++ optimizer's lrs directly; LambdaLR, ExponentialLR and ConstantLR
are written in Python over ``param_groups``, as is ``LRScheduler``, the base for your own.

As in PyTorch, a scheduler takes its first step (to epoch 0) when it is built, and ``step()`` after
each ``optimizer.step()`` advances it by one.
"""


from .. import _ember

__all__ = [
    "ConstantLR",
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "OneCycleLR",
    "SequentialLR",
    "StepLR",
]


def _cpp_optimizer(optimizer, who):
    cpp = getattr(optimizer, "_cpp", None)
    if cpp is None:
        raise TypeError(f"{who}: expected an ember.optim optimizer, got {type(optimizer).__name__}")
    return cpp


def _no_last_epoch(last_epoch, who):
    if last_epoch != -1:
        raise NotImplementedError(f"{who}: last_epoch is not supported; resume with load_state_dict")


class _CppScheduler:
    """A scheduler that is one of ember's C++ schedulers."""

    def __init__(self, optimizer, cpp):
        self.optimizer = optimizer
        self._cpp = cpp

    def step(self, epoch=None):
        """Advances one epoch and sets every group's lr."""
        if epoch is not None:
            raise NotImplementedError(f"{type(self).__name__}.step(epoch) is not supported: step() advances by one")
        self._cpp.step()

    def rewind(self, steps):
        """Takes back the last ``steps`` steps (ones the optimizer skipped on overflow)."""
        self._cpp.rewind(steps)

    def get_last_lr(self):
        """The lr of each group, as the last step set it."""
        return list(self._cpp.get_last_lr())

    @property
    def last_epoch(self):
        """The epoch reached: 0 after construction, one more per step()."""
        return self._cpp.last_epoch

    @property
    def base_lrs(self):
        """Each group's initial lr."""
        return list(self._cpp.base_lrs)

    def state_dict(self):
        """The C++ scheduler's state ("last_epoch", "step_count", "base_lrs.<g>", "last_lr.<g>", as 0-dim
        tensors): what ember's training checkpoints hold under "scheduler."."""
        return dict(self._cpp.state_dict())

    def load_state_dict(self, state_dict):
        """Restores a state dict of state_dict()'s form."""
        self._cpp.load_state_dict(state_dict)


class StepLR(_CppScheduler):
    """base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        _no_last_epoch(last_epoch, "StepLR")
        super().__init__(optimizer, _ember._StepLR(_cpp_optimizer(optimizer, "StepLR"), step_size, gamma))


class MultiStepLR(_CppScheduler):
    """base_lr * gamma ** (number of milestones <= epoch)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        _no_last_epoch(last_epoch, "MultiStepLR")
        super().__init__(optimizer, _ember._MultiStepLR(_cpp_optimizer(optimizer, "MultiStepLR"), list(milestones), gamma))


class CosineAnnealingLR(_CppScheduler):
    """eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        _no_last_epoch(last_epoch, "CosineAnnealingLR")
        super().__init__(optimizer, _ember._CosineAnnealingLR(_cpp_optimizer(optimizer, "CosineAnnealingLR"), T_max,
                                                              eta_min))


class LinearLR(_CppScheduler):
    """base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters): a linear warmup is
    LinearLR(opt, start_factor, 1.0, warmup_steps)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        _no_last_epoch(last_epoch, "LinearLR")
        super().__init__(optimizer, _ember._LinearLR(_cpp_optimizer(optimizer, "LinearLR"), start_factor, end_factor,
                                                     total_iters))


class OneCycleLR(_CppScheduler):
    """The 1cycle policy: from max_lr / div_factor up to max_lr over pct_start of the steps, then down
    to initial_lr / final_div_factor; momentum (or Adam's beta1) cycles inversely."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _no_last_epoch(last_epoch, "OneCycleLR")
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got '{anneal_strategy}'")
        if isinstance(max_lr, (list, tuple)):
            if len(set(max_lr)) != 1:
                raise NotImplementedError("OneCycleLR: one max_lr for every group is supported")
            max_lr = max_lr[0]
        for name, value in (("base_momentum", base_momentum), ("max_momentum", max_momentum)):
            if isinstance(value, (list, tuple)):
                raise NotImplementedError(f"OneCycleLR: {name} per group is not supported")
        super().__init__(optimizer, _ember._OneCycleLR(
            _cpp_optimizer(optimizer, "OneCycleLR"), float(max_lr), int(total_steps), pct_start,
            anneal_strategy == "cos", cycle_momentum, base_momentum, max_momentum, div_factor, final_div_factor,
            three_phase))


class SequentialLR(_CppScheduler):
    """Runs schedulers[0] until milestones[0], then schedulers[1] restarted at epoch 0, and so on
    (the schedulers must be ember's C++ ones over the same optimizer)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _no_last_epoch(last_epoch, "SequentialLR")
        for s in schedulers:
            if not isinstance(s, _CppScheduler):
                raise TypeError(f"SequentialLR: {type(s).__name__} is a Python scheduler; SequentialLR chains ember's "
                                "C++ ones (StepLR, MultiStepLR, CosineAnnealingLR, LinearLR, OneCycleLR)")
        self._children = list(schedulers)
        super().__init__(optimizer, _ember._SequentialLR(_cpp_optimizer(optimizer, "SequentialLR"),
                                                         [s._cpp for s in schedulers], list(milestones)))


class LRScheduler:
    """The base of schedulers written in Python: define ``get_lr()`` (the lrs at ``self.last_epoch``
    from ``self.base_lrs``); ``step()`` writes them into the optimizer's param groups."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError("param 'initial_lr' is not specified in param_groups when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self):
        """The lr of each group at self.last_epoch; subclasses define it."""
        raise NotImplementedError

    def step(self, epoch=None):
        """Advances one epoch (or jumps to ``epoch``) and sets every group's lr."""
        self._step_count += 1
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self):
        """The lr of each group, as the last step set it."""
        return self._last_lr

    def state_dict(self):
        """Everything but the optimizer (and functions, which are not saved)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state_dict):
        """Restores a state dict of state_dict()'s form."""
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """base_lr * lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"LambdaLR: expected {n} lr_lambdas, got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """base_lr * lr_lambda(epoch) per group."""
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        """The state without the optimizer and the functions."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class ExponentialLR(LRScheduler):
    """base_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """base_lr * gamma ** epoch per group."""
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """base_lr * factor until total_iters, then base_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError("ConstantLR: factor must be in [0, 1]")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """base_lr * factor before total_iters, base_lr after."""
        f = self.factor if self.last_epoch < self.total_iters else 1.0
        return [base * f for base in self.base_lrs]


