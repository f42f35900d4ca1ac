"""``L.BatchNormalization`` in torch: any input of two axes or more, gamma and beta apart.

Chainer's link normalizes over every axis but axis 1, whatever the input's rank; torch splits
that into BatchNorm1d/2d/3d, each refusing the other ranks, and has gamma and beta both or
neither. The statistics are the same: in train mode the batch's mean and biased variance
normalize, and the running mean and the *unbiased* variance are averaged in with weight
``1 - decay``, which is torch's ``momentum``; in eval mode the running ones normalize.
Chainer's ``chainer.config.train`` is the module's ``train()`` / ``eval()``.

Tests: ``tests/pytorch/weights/test_conversion.py`` (against Chainer's link, several steps).
"""
from __future__ import annotations

from typing import Any

from torch import nn

from researchutils._checks import check_bool, check_float, check_positive_int


class BatchNormalization(nn.BatchNorm2d):
    """``L.BatchNormalization(size, decay, eps, use_gamma=..., use_beta=...)`` in torch.

    Args:
        size (int): Channels (axis 1 of the input).
        decay (float): Chainer's decay of the running averages, in ``[0, 1)``; torch's
            ``momentum`` is ``1 - decay``.
        eps (float): Added to the variance.
        use_gamma (bool): Whether there is a scale (``weight``).
        use_beta (bool): Whether there is a shift (``bias``).

    Shapes: ``(N, size, ...)`` float32, kept.

    Example:
        >>> import torch
        >>> norm = BatchNormalization(3, decay=0.9)
        >>> norm.momentum
        0.09999999999999998
        >>> norm(torch.randn(4, 3, 2, 5, 5)).shape
        torch.Size([4, 3, 2, 5, 5])
    """

    def __init__(self, size: int, decay: float = 0.9, eps: float = 2e-5,
                 use_gamma: bool = True, use_beta: bool = True) -> None:
        decay = check_float(decay, 'decay', minimum=0, below=1)
        super().__init__(check_positive_int(size, 'size'),
                         eps=check_float(eps, 'eps', above=0), momentum=1 - decay)
        self.decay = decay
        if not check_bool(use_gamma, 'use_gamma'):
            del self.weight
            self.register_parameter('weight', None)
        if not check_bool(use_beta, 'use_beta'):
            del self.bias
            self.register_parameter('bias', None)

    def _check_input_dim(self, x: Any) -> None:
        if x.dim() < 2:
            raise ValueError('BatchNormalization needs an input of 2 axes or more (batch, '
                             'channels, ...), got the shape {}'.format(tuple(x.shape)))
