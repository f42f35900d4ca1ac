"""The bounds of gradient clipping, checked alike by the functions and the links that clip.

Tests: ``tests/chainer/test_clip_bounds.py``.
"""
from __future__ import annotations

from researchutils._checks import check_float


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
