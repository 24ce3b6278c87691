"""PyTorch's ``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``, built of ember's layers
(MultiheadAttention, Linear, LayerNorm, Dropout) with PyTorch's constructor arguments, submodule names
(so state dicts load across) and forward order, post-norm by default or pre-norm with ``norm_first``."""

import copy

from . import functional as F
from .layers import Dropout, LayerNorm, Linear, MultiheadAttention
from .modules import Module, ModuleList

__all__ = ["TransformerEncoder", "TransformerEncoderLayer"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block (linear1, activation, dropout, linear2), each added to its
    input with dropout: ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``, or with ``norm_first``
    ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``. ``activation`` is "relu", "gelu" or a callable."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise ValueError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got "
                                 f"{activation!r}")
            activation = _ACTIVATIONS[activation]
        elif not callable(activation):
            raise TypeError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got "
                            f"{type(activation).__name__}")
        factory = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """The layer on src ((L, B, E), or (B, L, E) with batch_first). Masks as MultiheadAttention's: bool
        (True = masked out) or floating (added to the scores)."""
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward_block(x))

    def _attention_block(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)
        return self.dropout1(out)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (``layers.0``, ``layers.1``, ...) applied in turn, then
    ``norm`` when given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be an ember.nn.Module, got "
                            f"{type(encoder_layer).__name__}")
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"TransformerEncoder: num_layers must be a positive int, got {num_layers!r}")
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """src through every layer with the same masks, then norm."""
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(out) if self.norm is not None else out
