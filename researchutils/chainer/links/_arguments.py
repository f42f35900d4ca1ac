"""Argument checks shared by the links: sizes given as an int or an (int, int) pair, and
the arrays a step is called with.

Single sizes go through :func:`researchutils._checks.check_int`, so the links accept and refuse
the same values with the same words as the rest of the project.

Tests: ``tests/chainer/links/test_arguments.py``.
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence

import chainer
from chainer.utils import type_check

from researchutils._checks import check_int
from researchutils._typing import VariableOrArray
from researchutils.chainer._array_checks import check_array  # noqa: F401 (the links' import)


def check_pair(name: str, value: int | Sequence[int], minimum: int) -> tuple[int, int]:
    """Returns ``value`` (an int, or a pair of ints) as a tuple of two ints ``>= minimum``."""
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


def check_image_batch(x: VariableOrArray) -> None:
    """Refuses anything but a batch of feature maps ``(B, C, H, W)``."""
    if x.ndim != 4:
        raise type_check.InvalidType('x.ndim == 4', 'x.ndim = {} (shape {})'.format(
            x.ndim, x.shape))


def check_initializer(value: object, name: str) -> None:
    """Refuses what Chainer would not take as an initializer, naming the argument.

    Chainer takes None (its default), a callable such as
    :class:`chainer.initializers.Normal`, a number or an array (a constant); a string
    passes its own test of a scalar and fails later without the argument's name.
    """
    if value is None or callable(value):
        return
    if isinstance(value, bool) or not (
            isinstance(value, numbers.Real)
            or (isinstance(value, chainer.get_array_types())
                and value.dtype.kind in 'biuf')):
        raise TypeError('{} must be an initializer (such as chainer.initializers.Normal()), a '
                        'number, an array of numbers or None, got {!r}'.format(name, value))


def check_sizes(in_size: object, out_size: object) -> tuple[int | None, int | None]:
    """Checks the sizes of an LSTM link: ``(in_size, out_size)`` or ``(out_size,)`` alone.

    As in :class:`chainer.links.LSTM`, with ``out_size`` None the one size given is the
    output size and the input size is inferred at the first step. A size of 0 is refused
    (Chainer's own ``L.LSTM(0, 4)`` fails with a ZeroDivisionError).
    """
    if out_size is None:
        check_int(in_size, 'in_size', minimum=1)
    else:
        check_int(in_size, 'in_size', minimum=1, allow_none=True)
        check_int(out_size, 'out_size', minimum=1)
    return in_size, out_size  # type: ignore[return-value]
