"""Angles wrapped into one turn of a chosen range, in radians or degrees (NumPy only)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from researchutils._checks import check_float, check_number_array
from researchutils._typing import FloatArray

__all__ = ['fit_angle_in_rad_range', 'fit_angle_in_deg_range']


def fit_angle_in_rad_range(angles: ArrayLike, min_angle: float = 0.0,
                           max_angle: float = 2 * math.pi) -> FloatArray:
    """Wraps angles in radians into ``[min_angle, min_angle + 2 pi)``.

    Each angle is moved by whole turns, so it points the same way. The range is
    half-open: with the default ``[0, 2 pi]``, ``2 pi`` becomes ``0``; with
    ``[-pi, pi]``, ``pi`` becomes ``-pi``.

    Args:
        angles (float or array-like): Angles in radians, of any shape; integers
            are taken as floats.
        min_angle (float): The lower end of the range.
        max_angle (float): The upper end; ``max_angle - min_angle`` must be at least
            one turn (``2 pi``).

    Returns:
        numpy.ndarray: The wrapped angles, with the shape of ``angles`` (0-d for a
        scalar); float32 input stays float32, anything else becomes float64.

    Raises:
        ValueError: A bound is NaN or infinite (every angle would come back NaN),
            ``min_angle`` is above ``max_angle``, the range is narrower than a
            turn, or an angle is infinite (NaN angles stay NaN).
        TypeError: A bound is not a real number, or ``angles`` is not numbers
            (None, strings).

    Example:

        >>> import math
        >>> from researchutils.math.angle import fit_angle_in_rad_range
        >>> fit_angle_in_rad_range([-math.pi / 2, 5 * math.pi]) / math.pi
        array([1.5, 1. ])
        >>> float(fit_angle_in_rad_range(math.pi, min_angle=-math.pi, max_angle=math.pi))
        -3.141592653589793
    """
    return _fit(angles, min_angle, max_angle, 2 * math.pi, '2 pi')


def fit_angle_in_deg_range(angles: ArrayLike, min_angle: float = 0.0,
                           max_angle: float = 360.0) -> FloatArray:
    """Wraps angles in degrees into ``[min_angle, min_angle + 360)``.

    The degree twin of :func:`fit_angle_in_rad_range`: with the default
    ``[0, 360]``, ``360`` becomes ``0``; with ``[-180, 180]``, ``180`` becomes
    ``-180``.

    Args:
        angles (float or array-like): Angles in degrees, of any shape; integers are
            taken as floats.
        min_angle (float): The lower end of the range.
        max_angle (float): The upper end; ``max_angle - min_angle`` must be at least
            ``360``.

    Returns:
        numpy.ndarray: The wrapped angles, with the shape of ``angles``.

    Raises:
        ValueError: A bound is NaN or infinite, ``min_angle`` is above
            ``max_angle``, the range is narrower than 360 degrees, or an angle is
            infinite.
        TypeError: A bound is not a real number, or ``angles`` is not numbers.

    Example:

        >>> from researchutils.math.angle import fit_angle_in_deg_range
        >>> fit_angle_in_deg_range([-90, 450, 360])
        array([270.,  90.,   0.])
        >>> fit_angle_in_deg_range([190.0, 180.0], min_angle=-180.0, max_angle=180.0)
        array([-170., -180.])
    """
    return _fit(angles, min_angle, max_angle, 360.0, '360')


def _fit(angles: ArrayLike, min_angle: float, max_angle: float, turn: float,
         turn_text: str) -> FloatArray:
    min_angle = check_float(min_angle, 'min_angle')
    max_angle = check_float(max_angle, 'max_angle')
    if min_angle > max_angle:
        raise ValueError('min_angle ({!r}) must not be above max_angle ({!r})'.format(
            min_angle, max_angle))
    if max_angle - min_angle < turn:
        raise ValueError('max_angle - min_angle must hold one turn ({}), got [{!r}, {!r}]'.format(
            turn_text, min_angle, max_angle))
    values: NDArray[Any] = check_number_array(angles, 'angles')
    if np.isinf(values).any():
        raise ValueError('angles must not be infinite (an infinite angle points nowhere), got '
                         '{} infinite of {}'.format(np.count_nonzero(np.isinf(values)),
                                                    values.size))
    dtype = values.dtype if values.dtype == np.float32 else np.float64
    values = values.astype(dtype, copy=False)
    offset = np.mod(values - min_angle, turn)
    # Rounding can make a tiny negative offset exactly one turn.
    offset = np.where(offset >= turn, 0.0, offset).astype(dtype, copy=False)
    return np.clip(offset + min_angle, min_angle, max_angle).astype(dtype, copy=False)
