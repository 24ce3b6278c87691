"""Activation checkpointing (``torch.utils.checkpoint`` with use_reentrant=False), over ember's
nn::checkpoint: the function's activations are not kept for backward but recomputed when backward
needs them, from the same inputs and random state (dropout draws the same masks)."""

from .. import _ember
from .._ember import Tensor, _nn

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), keeping only the tensor arguments for backward and recomputing the
    rest. The function returns a tensor or a tuple of tensors; non-tensor arguments are passed as
    they are to both runs."""
    if use_reentrant:
        raise NotImplementedError("checkpoint: use_reentrant=True is not supported (ember's is the non-reentrant form)")
    if not preserve_rng_state:
        raise NotImplementedError("checkpoint: ember always replays the default generator's state")
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    single = []

    def tensors_only(*tensors):
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        out = function(*full, **kwargs)
        single.append(isinstance(out, Tensor))
        return out

    outputs = _nn.checkpoint(tensors_only, [args[i] for i in positions])
    return outputs[0] if single and single[0] else tuple(outputs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None):
    """``functions`` (a Sequential or a list of modules) cut into ``segments`` runs; every run but the
    last is checkpointed, so only the segments' boundaries are kept."""
    modules = list(functions)
    if not 1 <= segments <= len(modules):
        raise _ember.ValueError(f"checkpoint_sequential: segments must be in [1, {len(modules)}], got {segments}")
    size, extra = divmod(len(modules), segments)
    start = 0
    for s in range(segments):
        end = start + size + (1 if s < extra else 0)
        run = modules[start:end]

        def run_segment(x, run=run):
            for m in run:
                x = m(x)
            return x

        input = run_segment(input) if s == segments - 1 else checkpoint(run_segment, input)
        start = end
    return input
