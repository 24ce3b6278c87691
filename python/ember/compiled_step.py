"""Whole-step capture from Python (train/compiled_step.h): ``ember.compile_step(step, optimizers=[...])``
runs a training step written in Python eagerly for a few warm-up calls per input shape, then captures
it once and replays it. On a GPU the capture is a CUDA graph: a replay launches every kernel of the
forward, backward and optimizer step at once, and no Python runs at all. On the CPU each replay runs
the step again under the same rules, so a step that works here works captured::

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = ember.compile_step(step, optimizers=[opt])
    for x, y in loader:
        loss = compiled(x, y)  # after a replay, the graph's own tensor: clone it to keep it

The step must queue the same work every call, its inputs differing only in their values: reading a
device value on the host (``item()``, ``print(t)``, a branch on a tensor) raises ``ember.CaptureError``
naming the op. Learning rates and momentum may change between calls (a replay reads them from device
memory); another hyperparameter's change captures the step again. Random ops draw new numbers on each
replay, from ``generators`` (ember's default generator when empty)."""

from . import _ember
from ._ember import Tensor

__all__ = ["CompiledStep", "compile_step"]


class CompiledStep:
    """A training step run eagerly for warm-up, then captured per input shape and replayed (see the
    module's description). Call it with the step's tensors; it returns what the step returns."""

    def __init__(self, step, optimizers=(), generators=(), warmup_steps=3, max_graphs=4):
        from .amp import _cpp_optimizer

        if not callable(step):
            raise TypeError(f"compile_step: step must be callable, got {type(step).__name__}")
        returns = {}  # whether the step returns one tensor; not self, which would make a cycle through C++

        def run(batch):
            out = step(*batch)
            returns["one"] = isinstance(out, Tensor)
            if not returns["one"] and not isinstance(out, (list, tuple)):
                raise TypeError(f"compile_step: the step must return a tensor or a sequence of tensors, got "
                                f"{type(out).__name__}")
            out = [out] if returns["one"] else list(out)
            if not all(isinstance(t, Tensor) for t in out):
                raise TypeError("compile_step: the step must return a tensor or a sequence of tensors")
            return out

        self._returns = returns
        # The C++ step holds plain pointers to these: they live as long as it does.
        self._optimizers, self._generators = list(optimizers), list(generators)
        for o in self._optimizers:
            if getattr(o, "_python_state", None) is not None:
                raise TypeError(f"compile_step: {type(o).__name__} is written in Python and reads its hyperparameters "
                                "on the host, which a captured step would freeze; use ember's SGD, Adam, AdamW or LAMB")
        self._cpp = _ember._CompiledStep(run, [_cpp_optimizer(o, "compile_step") for o in self._optimizers],
                                         self._generators, int(warmup_steps), int(max_graphs))

    def __call__(self, *batch):
        # A replay copies the batch into buffers of its own: it can neither give an input a gradient nor
        # write into the caller's tensor, so a step that needs either is refused on its first calls
        # instead of changing behaviour once captured.
        for i, t in enumerate(batch):
            if isinstance(t, Tensor) and t.requires_grad:
                raise _ember.CaptureError(f"compile_step: input {i} requires grad, which a replay cannot give it; "
                                          "pass it detached (the step's parameters get their gradients)")
        versions = [t._version if isinstance(t, Tensor) else None for t in batch]
        out = self._cpp(list(batch))
        for i, (t, version) in enumerate(zip(batch, versions)):
            if version is not None and t._version != version:
                raise _ember.CaptureError(f"compile_step: the step wrote into input {i} in place, which a replay "
                                          "would not do to the caller's tensor; write into a tensor of the step's own")
        return out[0] if self._returns.get("one") else tuple(out)

    @property
    def stats(self):
        """What the calls so far did: {"eager": steps run eagerly, "captures": graphs captured,
        "replays": steps replayed}."""
        return self._cpp.stats()


def compile_step(step, optimizers=(), generators=(), warmup_steps=3, max_graphs=4):
    """``step`` (a function of the batch's tensors that trains one step and returns tensors) as a
    CompiledStep: ``warmup_steps`` eager calls per input shape (they create the optimizer state and pick
    the GPU libraries' plans), then one capture and replays, for up to ``max_graphs`` shapes (further
    shapes run eagerly). ``optimizers``: those the step runs, whose learning rates each replay reads."""
    return CompiledStep(step, optimizers, generators, warmup_steps, max_graphs)
