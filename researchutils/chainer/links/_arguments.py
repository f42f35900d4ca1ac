"""Argument checks shared by the links: sizes given as an int or an (int, int) pair, and
the arrays a step is called with.

Sizes and size pairs are checked in :mod:`researchutils._layer_checks` (shared with the torch
twins, which must refuse the same values with the same words); they are re-exported here.

Tests: ``tests/chainer/links/test_arguments.py``.
"""
from __future__ import annotations

import numbers

import chainer
from chainer.utils import type_check

from researchutils._layer_checks import check_pair, check_sizes  # noqa: F401 (the links')
from researchutils._typing import VariableOrArray
from researchutils.chainer._array_checks import check_array  # noqa: F401 (the links' import)


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
