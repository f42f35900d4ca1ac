"""Chainer's one-step recurrent links in torch: ``L.LSTM``, ``L.StatelessLSTM``, the GRUs.

:class:`LSTM` and :class:`StatelessLSTM` are ``nn.LSTMCell`` with Chainer's calls (the
stateful one keeps ``c`` and ``h`` as ``L.LSTM`` does, a smaller batch updating the first
rows only) and Chainer's single bias: torch's second bias ``bias_hh`` is a zero buffer, not a
parameter, so an optimizer trains exactly Chainer's parameters. Their weights are in torch's
stacked gate order i, f, g, o; Chainer's interleaved a, i, f, o is reordered by the one LSTM
rule of :mod:`researchutils.pytorch.weights`. ``L.StatelessGRU`` and ``L.StatefulGRU`` (=
``L.GRU``) apply the reset gate before ``U`` (``U(r * h)``), which ``nn.GRUCell`` cannot, so
:class:`StatelessGRU` and :class:`StatefulGRU` keep Chainer's six Linear children.

Tests: ``tests/pytorch/weights/test_recurrent.py`` (against Chainer, state carried).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from researchutils._checks import check_positive_int
from researchutils.pytorch.nn.connection import Linear


class _OneBiasLSTMCell(nn.LSTMCell):
    """nn.LSTMCell whose ``bias_hh`` is a zero buffer (Chainer's LSTM has one bias)."""

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__(check_positive_int(in_size, 'in_size'),
                         check_positive_int(out_size, 'out_size'))
        del self.bias_hh
        self.register_buffer('bias_hh', torch.zeros(4 * out_size), persistent=False)

    def _step(self, c: Any, h: Any, x: Any) -> tuple[Any, Any]:
        """``(c_new, h_new)`` of rows ``0..len(x)-1``; None for a state means zeros."""
        x = x.flatten(start_dim=1)
        zeros = x.new_zeros(x.shape[0], self.hidden_size)
        h_new, c_new = super().forward(x, (zeros if h is None else h,
                                           zeros if c is None else c))
        return c_new, h_new


class StatelessLSTM(_OneBiasLSTMCell):
    """``L.StatelessLSTM``: ``forward(c, h, x)`` returns ``(c_new, h_new)``.

    Args:
        in_size (int): Input features (the input is flattened after the batch axis).
        out_size (int): Units.

    Shapes: ``c`` and ``h`` ``(N, out_size)`` or None (zeros), ``x`` ``(N, in_size)``,
    float32.

    Example:
        >>> import torch
        >>> c, h = StatelessLSTM(3, 4)(None, None, torch.zeros(2, 3))
        >>> c.shape, h.shape
        (torch.Size([2, 4]), torch.Size([2, 4]))
    """

    def forward(self, c: Any, h: Any, x: Any) -> tuple[Any, Any]:
        return self._step(c, h, x)


class LSTM(_OneBiasLSTMCell):
    """``L.LSTM``: a stateful LSTM; ``forward(x)`` returns ``h`` and keeps ``c`` and ``h``.

    As in Chainer, a batch smaller than the state's updates the state's first rows and
    keeps the others; :meth:`reset_state` forgets the state, :meth:`set_state` sets it.

    Args:
        in_size (int): Input features (the input is flattened after the batch axis).
        out_size (int): Units.

    Shapes: ``x`` ``(N, in_size)`` float32; the result ``(N, out_size)``.

    Example:
        >>> import torch
        >>> lstm = LSTM(3, 4)
        >>> lstm(torch.zeros(2, 3)).shape
        torch.Size([2, 4])
        >>> lstm.h.shape
        torch.Size([2, 4])
    """

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__(in_size, out_size)
        self.c: Any = None
        self.h: Any = None

    def reset_state(self) -> None:
        """Forgets ``c`` and ``h`` (the next step starts from zeros)."""
        self.c = self.h = None

    def set_state(self, c: Any, h: Any) -> None:
        """Sets the cell state ``c`` and the output ``h``, each ``(N, out_size)``."""
        for name, state in (('c', c), ('h', h)):
            if not isinstance(state, torch.Tensor) or state.dim() != 2 or (
                    state.shape[1] != self.hidden_size):
                raise ValueError('{} must be a tensor of shape (N, {}), got {!r}'.format(
                    name, self.hidden_size, state))
        self.c, self.h = c, h

    def forward(self, x: Any) -> Any:
        batch = x.shape[0]
        for name, state in (('c', self.c), ('h', self.h)):
            if state is not None and state.shape[0] < batch:
                raise ValueError('the batch size of x ({}) must not exceed that of the state '
                                 '{} ({})'.format(batch, name, state.shape[0]))
        c_old, h_old = self.c, self.h
        c, h = self._step(None if c_old is None else c_old[:batch],
                          None if h_old is None else h_old[:batch], x)
        self.c = c if c_old is None else torch.cat([c, c_old[batch:]])
        self.h = h if h_old is None else torch.cat([h, h_old[batch:]])
        return h


class _GRUBase(nn.Module):

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__()
        in_size = check_positive_int(in_size, 'in_size')
        self.out_size = check_positive_int(out_size, 'out_size')
        for name, size in (('W_r', in_size), ('U_r', out_size), ('W_z', in_size),
                           ('U_z', out_size), ('W', in_size), ('U', out_size)):
            self.add_module(name, Linear(size, out_size))


class StatelessGRU(_GRUBase):
    """``L.StatelessGRU``: ``forward(h, x)`` returns ``h'``.

    ``r = sigmoid(W_r x + U_r h)``, ``z = sigmoid(W_z x + U_z h)``,
    ``h' = (1 - z) h + z tanh(W x + U(r h))``, each of the six a Linear with a bias.

    Args:
        in_size (int): Input features.
        out_size (int): Units.

    Example:
        >>> import torch
        >>> StatelessGRU(3, 4)(torch.zeros(2, 4), torch.zeros(2, 3)).shape
        torch.Size([2, 4])
    """

    def forward(self, h: Any, x: Any) -> Any:
        r = torch.sigmoid(self.W_r(x) + self.U_r(h))
        z = torch.sigmoid(self.W_z(x) + self.U_z(h))
        h_bar = torch.tanh(self.W(x) + self.U(r * h))
        return z * h_bar + (1 - z) * h


class StatefulGRU(_GRUBase):
    """``L.StatefulGRU`` (and ``L.GRU``): ``forward(x)`` returns and keeps ``h``.

    The first step (no state) is Chainer's: ``h' = z tanh(W x)`` with ``z = sigmoid(W_z x)``,
    without the ``U`` terms (their biases included); :meth:`reset_state` returns to it.

    Args:
        in_size (int): Input features.
        out_size (int): Units.

    Example:
        >>> import torch
        >>> gru = StatefulGRU(3, 4)
        >>> gru(torch.zeros(2, 3)).shape
        torch.Size([2, 4])
    """

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__(in_size, out_size)
        self.h: Any = None

    def reset_state(self) -> None:
        """Forgets ``h``."""
        self.h = None

    def set_state(self, h: Any) -> None:
        """Sets the state ``h``, ``(N, out_size)``."""
        if not isinstance(h, torch.Tensor) or h.dim() != 2 or h.shape[1] != self.out_size:
            raise ValueError('h must be a tensor of shape (N, {}), got {!r}'.format(
                self.out_size, h))
        self.h = h

    def forward(self, x: Any) -> Any:
        z = self.W_z(x)
        h_bar = self.W(x)
        if self.h is not None:
            r = torch.sigmoid(self.W_r(x) + self.U_r(self.h))
            z = z + self.U_z(self.h)
            h_bar = h_bar + self.U(r * self.h)
        z = torch.sigmoid(z)
        h_bar = torch.tanh(h_bar)
        self.h = z * h_bar if self.h is None else z * h_bar + (1 - z) * self.h
        return self.h
