"""What the torch twins share: initializers as Chainer takes them, and the recurrent state.

An initializer argument is what Chainer's links take, in torch's style: None (the twin's
Chainer default), a number (a constant), or a callable that fills a tensor in place
(``torch.nn.init.orthogonal_``, :class:`~researchutils.pytorch.NormalWithLoc`). Chainer's
default weight initializer, ``LeCunNormal``, is :func:`lecun_normal_` here.

Tests: ``tests/pytorch/nn/test_grad_clip_lstm.py`` (and each twin's own file).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Union

import torch

from researchutils.pytorch._tensor_checks import check_float_tensor

#: What an initializer argument may be, besides None (the twin's Chainer default).
Initializer = Union[float, Callable[[torch.Tensor], object]]


def check_initializer(value: object, name: str) -> None:
    """Refuses what is not an initializer (a str, a bool), naming the argument.

    Example:
        >>> check_initializer('normal', 'upward_init')
        Traceback (most recent call last):
        ...
        TypeError: upward_init must be an initializer (a callable that fills a tensor in \
place, such as torch.nn.init.orthogonal_), a number or None, got 'normal'
    """
    if value is None or callable(value):
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError('{} must be an initializer (a callable that fills a tensor in place, '
                        'such as torch.nn.init.orthogonal_), a number or None, got {!r}'.format(
                            name, value))


def lecun_normal_(tensor: torch.Tensor) -> torch.Tensor:
    """Chainer's default ``LeCunNormal``: N(0, 1 / fan_in), fan_in = ``shape[1] * prod(shape[2:])``.

    Example:
        >>> lecun_normal_(torch.empty(3, 4)).shape
        torch.Size([3, 4])
    """
    fan_in = tensor.shape[1] * math.prod(tensor.shape[2:])
    with torch.no_grad():
        return tensor.normal_(0.0, math.sqrt(1.0 / fan_in))


def initialize(tensor: torch.Tensor, initializer: Initializer | None,
               default: Callable[[torch.Tensor], object]) -> None:
    """Fills ``tensor`` in place: ``initializer`` (a number is a constant), else ``default``."""
    with torch.no_grad():
        if initializer is None:
            default(tensor)
        elif callable(initializer):
            initializer(tensor)
        else:
            tensor.fill_(initializer)


def check_state(c: object, h: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``(c, h)`` for ``set_state``: floating point tensors, or TypeError naming the one."""
    return check_float_tensor(c, 'c'), check_float_tensor(h, 'h')


def check_image_batch(x: torch.Tensor) -> None:
    """Refuses anything but a batch of feature maps ``(B, C, H, W)``, naming ``x``."""
    if x.ndim != 4:
        raise ValueError('x must be a batch of feature maps (B, C, H, W), got shape {}'.format(
            tuple(x.shape)))
