"""Utilities (``torch.utils``): ``data`` (Dataset, DataLoader, samplers) and ``checkpoint`` (activation
checkpointing)."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
