"""Argument checks of the layers that both frameworks build: clip bounds, sizes, size pairs.

The Chainer links (``researchutils.chainer.links``) and their torch twins
(``researchutils.pytorch.nn``) take the same arguments and must refuse the same values with the
same words, so the rules live here once, in the standard library only (the torch side never
imports Chainer). Single numbers go through :mod:`researchutils._checks`.

Tests: ``tests/chainer/test_clip_bounds.py`` and ``tests/chainer/links/test_arguments.py``
(through the Chainer side's re-exports), ``tests/pytorch/nn/`` (the torch side's refusals).
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence

from researchutils._checks import check_float, check_int


def check_clip_bounds(clip_min: float | None,
                      clip_max: float | None) -> tuple[float | None, float | None]:
    """Returns ``(clip_min, clip_max)`` as floats (or None); an infinite bound is no bound.

    Raises:
        TypeError: A bound is a bool or not a real number.
        ValueError: A bound is NaN, or ``clip_min > clip_max``.

    Example:
        >>> check_clip_bounds(-1, None)
        (-1.0, None)
    """
    clip_min = check_float(clip_min, 'clip_min', finite=False, allow_none=True)
    clip_max = check_float(clip_max, 'clip_max', finite=False, allow_none=True)
    if clip_min is not None and clip_max is not None and clip_min > clip_max:
        raise ValueError('clip_min must not exceed clip_max, got clip_min={} and '
                         'clip_max={}'.format(clip_min, clip_max))
    return clip_min, clip_max


def check_pair(name: str, value: int | Sequence[int], minimum: int) -> tuple[int, int]:
    """Returns ``value`` (an int, or a pair of ints) as a tuple of two ints ``>= minimum``.

    Example:
        >>> check_pair('ksize', 3, 1)
        (3, 3)
    """
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError('{} must be an int or a pair of ints, got {!r}'.format(
                name, value))
        first, second = value
        return check_int(first, name, minimum=minimum), check_int(second, name, minimum=minimum)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError('{} must be an int or a pair of ints, not {!r}'.format(name, value))
    size = check_int(value, name, minimum=minimum)
    return size, size


def check_sizes(in_size: object, out_size: object) -> tuple[int | None, int | None]:
    """Checks the sizes of an LSTM layer: ``(in_size, out_size)`` or ``(out_size,)`` alone.

    As in :class:`chainer.links.LSTM`, with ``out_size`` None the one size given is the
    output size and the input size is inferred at the first step. A size of 0 is refused
    (Chainer's own ``L.LSTM(0, 4)`` fails with a ZeroDivisionError).

    Example:
        >>> check_sizes(8, None)
        (8, None)
    """
    if out_size is None:
        check_int(in_size, 'in_size', minimum=1)
    else:
        check_int(in_size, 'in_size', minimum=1, allow_none=True)
        check_int(out_size, 'out_size', minimum=1)
    return in_size, out_size  # type: ignore[return-value]
