"""Min-max scaling and standardization over a whole array (NumPy only)."""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from researchutils._checks import check_float, check_number_array
from researchutils._typing import FloatArray

__all__ = ['normalize_by_min_max', 'standardize']


def normalize_by_min_max(data: ArrayLike, min_value: float = 0.0,
                         max_value: float = 1.0) -> FloatArray:
    """Scales data linearly so that its minimum is ``min_value`` and its maximum ``max_value``.

    The minimum and maximum are taken over the whole array. Constant data (every
    value equal) has no spread to scale and maps to ``min_value`` everywhere, as
    scikit-learn's ``MinMaxScaler`` does. Finite data gives finite results, also
    when its range (or ``max_value - min_value``) is beyond the largest float,
    as in ``[-1e308, 1e308]``.

    Args:
        data (array-like): Finite numbers, of any shape, not empty.
        min_value (float): The value the minimum maps to; finite.
        max_value (float): The value the maximum maps to; finite, above
            ``min_value``.

    Returns:
        numpy.ndarray: The scaled data, with the shape of ``data``; float32 input
        stays float32, anything else becomes float64.

    Raises:
        ValueError: A bound is NaN or infinite or beyond the result's type
            (``1e39`` for float32 data), ``min_value`` is not below ``max_value``,
            or ``data`` is empty or holds NaN or infinity.
        TypeError: A bound is not a real number.

    Example:

        >>> from researchutils.math.normalization import normalize_by_min_max
        >>> normalize_by_min_max([2, 4, 6])
        array([0. , 0.5, 1. ])
        >>> normalize_by_min_max([2, 4, 6], min_value=-1.0, max_value=1.0)
        array([-1.,  0.,  1.])
    """
    min_value = check_float(min_value, 'min_value')
    max_value = check_float(max_value, 'max_value')
    if not min_value < max_value:
        raise ValueError('min_value ({!r}) must be below max_value ({!r})'.format(
            min_value, max_value))
    data = _finite_floats(data)
    bounds = _bounds_in(data.dtype, min_value=min_value, max_value=max_value)
    low, high = data.min(), data.max()
    if low == high:
        return np.full_like(data, bounds[0])
    # Both the data and the bounds are scaled by a power of two first: exact, and
    # it keeps high - low (or max_value - min_value) from overflowing.
    data, _ = _scaled_to_unit(data)
    low, high = data.min(), data.max()
    fraction = (data - low) / (high - low)
    bounds, exponent = _scaled_to_unit(bounds)
    scaled = bounds[0] + fraction * (bounds[1] - bounds[0])
    with np.errstate(over='ignore'):  # a rounding above the largest float, clipped back
        result = np.ldexp(scaled, exponent)
    return np.clip(result, *np.ldexp(bounds, exponent)).astype(data.dtype, copy=False)


def standardize(data: ArrayLike) -> FloatArray:
    """Shifts and scales data to mean 0 and standard deviation 1.

    The mean and the (population, ``ddof=0``) standard deviation are taken over
    the whole array. Constant data has no spread and gives zeros everywhere, as
    scikit-learn's ``StandardScaler`` does; constancy is decided exactly (every
    value equal), because the computed deviation of equal values may be a
    rounding error above zero rather than zero. Finite data gives finite results
    even where its sum or squares would be beyond the largest float
    (``[-1e200, 1e200]`` gives ``[-1, 1]``), or below the smallest (float32
    ``[-1e-30, 1e-30]``).

    Args:
        data (array-like): Finite numbers, of any shape, not empty.

    Returns:
        numpy.ndarray: The standardized data, with the shape of ``data``; float32
        input stays float32, anything else becomes float64.

    Raises:
        ValueError: ``data`` is empty or holds NaN or infinity.

    Example:

        >>> from researchutils.math.normalization import standardize
        >>> standardize([1.0, 2.0, 3.0, 4.0])
        array([-1.34164079, -0.4472136 ,  0.4472136 ,  1.34164079])
        >>> standardize([5.0, 5.0])
        array([0., 0.])
    """
    data = _finite_floats(data)
    if data.min() == data.max():
        return np.zeros_like(data)
    # Scaled by a power of two into [-1, 1] first: exact, so the result is NumPy's
    # (x - mean) / std, but neither the sum nor the squares can overflow or underflow.
    data, _ = _scaled_to_unit(data)
    deviation = data - data.mean()
    return (deviation / np.sqrt(np.mean(deviation * deviation))).astype(data.dtype, copy=False)


def _scaled_to_unit(values: FloatArray) -> tuple[FloatArray, Any]:
    """``values * 2**-exponent`` with its largest magnitude in [0.5, 1), and ``exponent``."""
    _, exponent = np.frexp(np.max(np.abs(values)))
    return np.ldexp(values, -exponent), exponent


def _bounds_in(dtype: np.dtype[Any], **bounds: float) -> FloatArray:
    with np.errstate(over='ignore'):
        values = np.array(list(bounds.values()), dtype=dtype)
    for (name, value), converted in zip(bounds.items(), values):
        if not np.isfinite(converted):
            raise ValueError('{}={!r} does not fit the {} result (it would become '
                             'infinity)'.format(name, value, dtype.name))
    return values


def _finite_floats(values: ArrayLike) -> FloatArray:
    data: NDArray[Any] = check_number_array(values, 'data')
    if data.size == 0:
        raise ValueError('data is empty (shape {}): there is nothing to scale'.format(
            data.shape))
    data = data.astype(data.dtype if data.dtype == np.float32 else np.float64, copy=False)
    bad = np.count_nonzero(~np.isfinite(data))
    if bad:
        raise ValueError('data holds {} values that are not finite (NaN or infinity)'.format(
            bad))
    return data
