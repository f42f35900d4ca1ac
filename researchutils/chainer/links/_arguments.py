"""Argument checks shared by the links: sizes given as an int or an (int, int) pair."""
import numbers

from chainer.utils import type_check


def check_size(name, value, minimum, allow_none=False):
    """Returns ``value`` as an int ``>= minimum`` (or None when allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError('{} must be an int{}, not {!r}'.format(
            name, ' or None' if allow_none else '', value))
    if value < minimum:
        raise ValueError('{} must be at least {}, got {!r}'.format(name, minimum, value))
    return int(value)


def check_pair(name, value, minimum):
    """Returns ``value`` (an int, or a pair of ints) as a tuple of two ints ``>= minimum``."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError('{} must be an int or a pair of ints, got {!r}'.format(
                name, value))
        return tuple(check_size(name, v, minimum) for v in value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError('{} must be an int or a pair of ints, not {!r}'.format(name, value))
    value = check_size(name, value, minimum)
    return value, value


def check_image_batch(x):
    """Refuses anything but a batch of feature maps ``(B, C, H, W)``."""
    if x.ndim != 4:
        raise type_check.InvalidType('x.ndim == 4', 'x.ndim = {} (shape {})'.format(
            x.ndim, x.shape))
