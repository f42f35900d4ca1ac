"""Argument checks shared by the links: sizes given as an int or an (int, int) pair.

Single sizes go through :func:`researchutils._checks.check_int`, so the links accept and refuse
the same values with the same words as the rest of the project.

Tests: ``tests/chainer/links/test_arguments.py``.
"""
import numbers

from chainer.utils import type_check

from researchutils._checks import check_int


def check_pair(name, value, minimum):
    """Returns ``value`` (an int, or a pair of ints) as a tuple of two ints ``>= minimum``."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError('{} must be an int or a pair of ints, got {!r}'.format(
                name, value))
        return tuple(check_int(v, name, minimum=minimum) for v in value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError('{} must be an int or a pair of ints, not {!r}'.format(name, value))
    value = check_int(value, name, minimum=minimum)
    return value, value


def check_image_batch(x):
    """Refuses anything but a batch of feature maps ``(B, C, H, W)``."""
    if x.ndim != 4:
        raise type_check.InvalidType('x.ndim == 4', 'x.ndim = {} (shape {})'.format(
            x.ndim, x.shape))
