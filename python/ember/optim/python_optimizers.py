"""RMSprop and Adagrad, written in Python over ``Optimizer`` (the way a user writes an optimizer): each step
updates one parameter at a time with ember's in-place ops, following the algorithms as PyTorch documents
them (torch.optim.RMSprop, torch.optim.Adagrad), with their defaults and state names. ember's C++
optimizers (SGD, Adam, AdamW, LAMB) step a whole group in one kernel; these launch a few ops per
parameter, which is fine for the models they are used on and keeps their code a reference to read."""

from .. import _ember
from ..autograd import enable_grad, no_grad
from . import Optimizer, _refuse

__all__ = ["Adagrad", "RMSprop"]


def _check_non_negative(kind, **values):
    for name, value in values.items():
        if not value >= 0:
            raise ValueError(f"{kind}: {name} must be a non-negative number, got {value}")


def _run_closure(closure):
    if closure is None:
        return None
    with enable_grad():
        return closure()


class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture 6e; ``torch.optim.RMSprop``): each gradient divided by the root of a
    running mean of its squares (``alpha`` the decay), optionally centred (minus the running mean of the
    gradient, squared), with momentum and L2 weight decay. State: step, square_avg, momentum_buffer
    (momentum > 0), grad_avg (centered)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_non_negative("RMSprop", lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        for name, value in (("capturable", capturable), ("maximize", maximize), ("differentiable", differentiable)):
            _refuse(name, value, False, "RMSprop")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered))

    def step(self, closure=None):
        """Updates every parameter that has a gradient; with ``closure``, calls it first and returns its loss."""
        loss = _run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
                weight_decay, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad if not weight_decay else p.grad.add(p, alpha=weight_decay)
                    state = self.state[p]
                    if not state:
                        state["step"] = _ember.zeros((), device=p.device)
                        state["square_avg"] = _ember.zeros_like(p)
                        if momentum > 0:
                            state["momentum_buffer"] = _ember.zeros_like(p)
                        if centered:
                            state["grad_avg"] = _ember.zeros_like(p)
                    state["step"].add_(1)
                    square_avg = state["square_avg"].mul_(alpha).add_(grad * grad, alpha=1 - alpha)
                    if centered:
                        grad_avg = state["grad_avg"].mul_(alpha).add_(grad, alpha=1 - alpha)
                        avg = (square_avg - grad_avg * grad_avg).sqrt().add_(eps)
                    else:
                        avg = square_avg.sqrt().add_(eps)
                    if momentum > 0:
                        buf = state["momentum_buffer"].mul_(momentum).add_(grad / avg)
                        p.add_(buf, alpha=-lr)
                    else:
                        p.add_(grad / avg, alpha=-lr)
        return loss


class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011; ``torch.optim.Adagrad``): each gradient divided by the root of the sum
    of all its squares so far, the learning rate decayed as lr / (1 + (step - 1) lr_decay), with L2 weight
    decay. State: step, sum (``initial_accumulator_value`` at the start)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_non_negative("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                            initial_accumulator_value=initial_accumulator_value, eps=eps)
        _refuse("maximize", maximize, False, "Adagrad")
        _refuse("differentiable", differentiable, False, "Adagrad")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
                                      initial_accumulator_value=initial_accumulator_value))
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = _ember.zeros((), device=p.device)
            state["sum"] = _ember.full_like(p, group["initial_accumulator_value"])
        return state

    def step(self, closure=None):
        """Updates every parameter that has a gradient; with ``closure``, calls it first and returns its loss."""
        loss = _run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, lr_decay, weight_decay, eps = group["lr"], group["lr_decay"], group["weight_decay"], group["eps"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad if not weight_decay else p.grad.add(p, alpha=weight_decay)
                    state = self._init_state(p, group)  # parameters of a group added later start here
                    step = state["step"].add_(1).item()
                    state["sum"].add_(grad * grad)
                    p.add_(grad / state["sum"].sqrt().add_(eps), alpha=-lr / (1 + (step - 1) * lr_decay))
        return loss
