"""PyTorch's recurrent layers: ``RNN``, ``LSTM`` and ``GRU`` over whole sequences and ``RNNCell``,
``LSTMCell`` and ``GRUCell`` for one step, with PyTorch's constructor arguments, parameter names
(``weight_ih_l0``, ..., ``_reverse``), results (``output, h_n`` and ``output, (h_n, c_n)``) and
layouts (sequence first, ``batch_first``, unbatched). Each wraps ember's C++ layer
(nn/layers/recurrent.h), so its forward is one C++ call; settings are fixed at construction."""

import warnings

from .._ember import _nn
from .layers import _factory
from .modules import _CppModule, _register_cpp_class

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]


def _state_pair(hx, layer, names):
    """(h, c) of an LSTM's state argument, which must be a pair of tensors."""
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError(f"{layer}: hx must be a tuple {names} of two tensors, got {type(hx).__name__}")
    return hx[0], hx[1]


def _warn_lone_dropout(layer, dropout, num_layers):
    # PyTorch's warning: dropout acts between layers, so one layer has nowhere to apply it.
    if isinstance(dropout, (int, float)) and dropout > 0 and num_layers == 1:
        warnings.warn(f"{layer}: dropout={dropout} with num_layers=1 has no effect: dropout is applied between "
                      "layers, after every layer but the last", UserWarning, stacklevel=4)


class _RecurrentLayer(_CppModule):
    """What RNN, LSTM and GRU share."""

    def flatten_parameters(self):
        """Does nothing: ember keeps each parameter a tensor of its own and needs no flat copy (PyTorch
        compacts them for cuDNN). Present so that code written for PyTorch runs unchanged."""


@_register_cpp_class("RNN")
class RNN(_RecurrentLayer):
    """Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``, act ``nonlinearity``
    ('tanh' or 'relu'), stacked ``num_layers`` deep, optionally bidirectional. Input (L, N, H_in),
    (N, L, H_in) with ``batch_first``, or (L, H_in); returns ``output, h_n``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        _warn_lone_dropout("RNN", dropout, num_layers)
        _CppModule.__init__(self, _nn.rnn(input_size, hidden_size, num_layers, nonlinearity, bool(bias),
                                          bool(batch_first), dropout, bool(bidirectional)))
        _factory(self, device, dtype)

    def forward(self, input, hx=None):
        """``(output, h_n)`` from the initial hidden state hx, (D*num_layers, N, H) (zeros when None)."""
        output, h_n, _ = self._cpp.recurrent(input, hx, None)
        return output, h_n


@_register_cpp_class("LSTM")
class LSTM(_RecurrentLayer):
    """Long short-term memory, gates i, f, g, o as PyTorch's; with ``proj_size`` > 0 each hidden state
    is projected to proj_size (``weight_hr_l{k}``). Input as RNN's; returns ``output, (h_n, c_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        _warn_lone_dropout("LSTM", dropout, num_layers)
        _CppModule.__init__(self, _nn.lstm(input_size, hidden_size, num_layers, bool(bias), bool(batch_first), dropout,
                                           bool(bidirectional), proj_size))
        _factory(self, device, dtype)

    def forward(self, input, hx=None):
        """``(output, (h_n, c_n))`` from hx = (h_0, c_0), or zeros when None."""
        h0, c0 = (None, None) if hx is None else _state_pair(hx, "LSTM", "(h_0, c_0)")
        output, h_n, c_n = self._cpp.recurrent(input, h0, c0)
        return output, (h_n, c_n)


@_register_cpp_class("GRU")
class GRU(_RecurrentLayer):
    """Gated recurrent unit, gates r, z, n as PyTorch's (``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``).
    Input as RNN's; returns ``output, h_n``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        _warn_lone_dropout("GRU", dropout, num_layers)
        _CppModule.__init__(self, _nn.gru(input_size, hidden_size, num_layers, bool(bias), bool(batch_first), dropout,
                                          bool(bidirectional)))
        _factory(self, device, dtype)

    def forward(self, input, hx=None):
        """``(output, h_n)`` from the initial hidden state hx (zeros when None)."""
        output, h_n, _ = self._cpp.recurrent(input, hx, None)
        return output, h_n


@_register_cpp_class("RNNCell")
class RNNCell(_CppModule):
    """One Elman RNN step: input (N, H_in) or (H_in), hx (N, H) or (H) → h'."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        _CppModule.__init__(self, _nn.rnn_cell(input_size, hidden_size, bool(bias), nonlinearity))
        _factory(self, device, dtype)

    def forward(self, input, hx=None):
        """h' from input and hx (zeros when None)."""
        return self._cpp.recurrent_cell(input, hx, None)[0]


@_register_cpp_class("LSTMCell")
class LSTMCell(_CppModule):
    """One LSTM step: input (N, H_in) or (H_in), hx = (h, c) → ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        _CppModule.__init__(self, _nn.lstm_cell(input_size, hidden_size, bool(bias)))
        _factory(self, device, dtype)

    def forward(self, input, hx=None):
        """``(h', c')`` from input and hx = (h, c), or zeros when None."""
        h, c = (None, None) if hx is None else _state_pair(hx, "LSTMCell", "(h, c)")
        return self._cpp.recurrent_cell(input, h, c)


@_register_cpp_class("GRUCell")
class GRUCell(_CppModule):
    """One GRU step: input (N, H_in) or (H_in), hx (N, H) or (H) → h'."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        _CppModule.__init__(self, _nn.gru_cell(input_size, hidden_size, bool(bias)))
        _factory(self, device, dtype)

    def forward(self, input, hx=None):
        """h' from input and hx (zeros when None)."""
        return self._cpp.recurrent_cell(input, hx, None)[0]
