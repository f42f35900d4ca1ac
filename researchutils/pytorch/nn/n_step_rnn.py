"""Chainer's NStep links in torch: ``nn.LSTM`` / ``nn.GRU`` with Chainer's call on sequences.

``L.NStepLSTM(n_layers, in_size, out_size, dropout)`` is called as ``link(hx, cx, xs)`` with
``xs`` a list of sequences of different lengths and returns ``(hy, cy, ys)``; the GRUs as
``link(hx, xs)`` returning ``(hy, ys)``. :class:`NStepLSTM`, :class:`NStepBiLSTM`,
:class:`NStepGRU` and :class:`NStepBiGRU` take and return the same, packing the sequences for
torch (in any order of lengths, as Chainer). Dropout acts between layers in train mode, in
both (its random masks differ). The weights keep torch's names (``weight_ih_l0``, ...); the
loaders of :mod:`researchutils.pytorch.weights` stack Chainer's per-gate ``w0``... ``w7`` and
``b0``... ``b7`` (cuDNN's layout) into them.

Tests: ``tests/pytorch/weights/test_recurrent.py`` (against Chainer's links).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn
from torch.nn.utils import rnn as rnn_utils

from researchutils._checks import check_float, check_positive_int


def _arguments(n_layers: int, in_size: int, out_size: int,
               dropout: float) -> dict[str, Any]:
    return dict(input_size=check_positive_int(in_size, 'in_size'),
                hidden_size=check_positive_int(out_size, 'out_size'),
                num_layers=check_positive_int(n_layers, 'n_layers'),
                dropout=check_float(dropout, 'dropout', minimum=0, below=1))


def _run(torch_forward: Any, rnn: Any, states: Any,
         xs: Sequence[Any]) -> tuple[Any, list[Any]]:
    """torch's RNN (``torch_forward``, unbound) on a list of sequences: (its states, the list
    of output sequences)."""
    if not isinstance(xs, (list, tuple)) or not xs:
        raise TypeError('xs must be a non-empty list of (length, in_size) tensors, got {!r}'
                        .format(xs))
    packed = rnn_utils.pack_sequence(list(xs), enforce_sorted=False)
    out, states = torch_forward(rnn, packed, states)
    padded, lengths = rnn_utils.pad_packed_sequence(out)
    return states, [padded[:length, i] for i, length in enumerate(lengths.tolist())]


class NStepLSTM(nn.LSTM):
    """``L.NStepLSTM``: ``forward(hx, cx, xs)`` returns ``(hy, cy, ys)``.

    Args:
        n_layers (int): Layers.
        in_size (int): Input features.
        out_size (int): Units.
        dropout (float): Dropout between layers (train mode).

    Shapes: ``hx``, ``cx``, ``hy``, ``cy`` ``(n_layers * directions, B, out_size)`` (None for
    zeros); ``xs[i]`` ``(L_i, in_size)``; ``ys[i]`` ``(L_i, directions * out_size)``; float32.

    Example:
        >>> import torch
        >>> hy, cy, ys = NStepLSTM(2, 3, 4, 0.0)(None, None, [torch.zeros(5, 3),
        ...                                                  torch.zeros(2, 3)])
        >>> hy.shape, [y.shape[0] for y in ys]
        (torch.Size([2, 2, 4]), [5, 2])
    """

    bidirectional_chainer = False

    def __init__(self, n_layers: int, in_size: int, out_size: int, dropout: float) -> None:
        super().__init__(bidirectional=self.bidirectional_chainer,
                         **_arguments(n_layers, in_size, out_size, dropout))

    def forward(self, hx: Any, cx: Any, xs: Sequence[Any]) -> tuple[Any, Any, list[Any]]:
        if (hx is None) != (cx is None):
            raise ValueError('hx and cx must both be given or both be None')
        (hy, cy), ys = _run(nn.LSTM.forward, self, None if hx is None else (hx, cx), xs)
        return hy, cy, ys


class NStepBiLSTM(NStepLSTM):
    """``L.NStepBiLSTM``: :class:`NStepLSTM` in both directions (outputs concatenated).

    Example:
        >>> import torch
        >>> hy, cy, ys = NStepBiLSTM(1, 3, 4, 0.0)(None, None, [torch.zeros(5, 3)])
        >>> hy.shape, ys[0].shape
        (torch.Size([2, 1, 4]), torch.Size([5, 8]))
    """

    bidirectional_chainer = True


class NStepGRU(nn.GRU):
    """``L.NStepGRU``: ``forward(hx, xs)`` returns ``(hy, ys)``.

    Args: as :class:`NStepLSTM`.

    Example:
        >>> import torch
        >>> hy, ys = NStepGRU(1, 3, 4, 0.0)(None, [torch.zeros(5, 3)])
        >>> hy.shape
        torch.Size([1, 1, 4])
    """

    bidirectional_chainer = False

    def __init__(self, n_layers: int, in_size: int, out_size: int, dropout: float) -> None:
        super().__init__(bidirectional=self.bidirectional_chainer,
                         **_arguments(n_layers, in_size, out_size, dropout))

    def forward(self, hx: Any, xs: Sequence[Any]) -> tuple[Any, list[Any]]:
        return _run(nn.GRU.forward, self, hx, xs)


class NStepBiGRU(NStepGRU):
    """``L.NStepBiGRU``: :class:`NStepGRU` in both directions (outputs concatenated).

    Example:
        >>> import torch
        >>> hy, ys = NStepBiGRU(1, 3, 4, 0.0)(None, [torch.zeros(5, 3)])
        >>> ys[0].shape
        torch.Size([5, 8])
    """

    bidirectional_chainer = True
