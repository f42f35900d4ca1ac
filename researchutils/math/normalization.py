"""Min-max scaling and standardization over a whole array (NumPy only)."""
import numbers

import numpy as np

__all__ = ['normalize_by_min_max', 'standardize']


def normalize_by_min_max(data, min_value=0.0, max_value=1.0):
    """Scales data linearly so that its minimum is ``min_value`` and its maximum ``max_value``.

    The minimum and maximum are taken over the whole array. Constant data (every
    value equal) has no spread to scale and maps to ``min_value`` everywhere, as
    scikit-learn's ``MinMaxScaler`` does.

    Args:
        data (array-like): Finite numbers, of any shape, not empty.
        min_value (float): The value the minimum maps to.
        max_value (float): The value the maximum maps to; above ``min_value``.

    Returns:
        numpy.ndarray: The scaled data, with the shape of ``data``; float32 input
        stays float32, anything else becomes float64.

    Raises:
        ValueError: ``min_value`` is not below ``max_value``, or ``data`` is empty or
            holds NaN or infinity.
        TypeError: A bound is not a real number.

    Example:

        >>> from researchutils.math.normalization import normalize_by_min_max
        >>> normalize_by_min_max([2, 4, 6])
        array([0. , 0.5, 1. ])
        >>> normalize_by_min_max([2, 4, 6], min_value=-1.0, max_value=1.0)
        array([-1.,  0.,  1.])
    """
    for name, value in (('min_value', min_value), ('max_value', max_value)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError('{} must be a real number, got {!r}'.format(name, value))
    if not min_value < max_value:
        raise ValueError('min_value ({!r}) must be below max_value ({!r})'.format(
            min_value, max_value))
    data = _finite_floats(data)
    low, high = data.min(), data.max()
    if low == high:
        return np.full_like(data, min_value)
    scaled = (data - low) / (high - low)
    return (scaled * (max_value - min_value) + min_value).astype(data.dtype, copy=False)


def standardize(data):
    """Shifts and scales data to mean 0 and standard deviation 1.

    The mean and the (population, ``ddof=0``) standard deviation are taken over
    the whole array. Constant data has no spread and gives zeros everywhere, as
    scikit-learn's ``StandardScaler`` does; constancy is decided exactly (every
    value equal), because the computed deviation of equal values may be a
    rounding error above zero rather than zero.

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
    return ((data - data.mean()) / data.std()).astype(data.dtype, copy=False)


def _finite_floats(data):
    data = np.asarray(data)
    if data.size == 0:
        raise ValueError('data is empty (shape {}): there is nothing to scale'.format(
            data.shape))
    data = data.astype(data.dtype if data.dtype == np.float32 else np.float64, copy=False)
    bad = np.count_nonzero(~np.isfinite(data))
    if bad:
        raise ValueError('data holds {} values that are not finite (NaN or infinity)'.format(
            bad))
    return data
