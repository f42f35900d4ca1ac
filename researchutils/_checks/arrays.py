"""Checks of array arguments: floating dtypes, arrays of numbers, dataset indices.

NumPy is imported inside each check, where it is used, so that importing the checks
costs the standard library only. Tests: ``tests/test_checks.py``.
"""
import reprlib
from collections.abc import Iterable, Mapping
from typing import Any


def check_float_dtype(value: object, name: str, *, allow_none: bool = False) -> Any:
    """Returns ``value`` as a NumPy floating dtype (None with ``allow_none``).

    NumPy is imported here, where it is used: the other checks need the standard
    library only.

    Raises:
        TypeError: ``value`` is not a dtype NumPy knows, or not a floating one.

    Example:
        >>> check_float_dtype('float32', 'dtype')
        dtype('float32')
        >>> check_float_dtype('int32', 'dtype')
        Traceback (most recent call last):
        ...
        TypeError: dtype must be a floating point dtype, float16, float32 or float64, got 'int32'
    """
    if value is None and allow_none:
        return None
    import numpy
    message = '{} must be a floating point dtype, float16, float32 or float64, got {!r}'.format(
        name, value)
    if value is None or isinstance(value, bool):
        raise TypeError(message)
    try:
        dtype = numpy.dtype(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise TypeError(message) from None
    if dtype.kind != 'f':
        raise TypeError(message)
    return dtype


def check_number_array(value: object, name: str) -> Any:
    """Returns ``value`` as a NumPy array of numbers (bool, integer or floating dtype).

    NumPy is imported here, where it is used. The message shows at most 80 characters
    of the value.

    Raises:
        TypeError: ``value`` is None, holds strings or objects, or is ragged.

    Example:
        >>> check_number_array([1, 2], 'angles')
        array([1, 2])
        >>> check_number_array(None, 'angles')
        Traceback (most recent call last):
        ...
        TypeError: angles must be numbers (an array of int or float), got None
    """
    import numpy
    message = '{} must be numbers (an array of int or float), got {}'.format(
        name, reprlib.repr(value))
    if value is None:
        raise TypeError(message)
    try:
        array = numpy.asarray(value)
    except (TypeError, ValueError):  # ragged nested lists (NumPy >= 1.24)
        raise TypeError(message) from None
    if array.dtype.kind not in 'biuf':
        raise TypeError('{} (dtype {})'.format(message, array.dtype))
    return array


def check_indices(value: object, name: str) -> Any:
    """Returns dataset indices: a ``range`` as it is, else a 1-d int64 NumPy array.

    Every index is an integer >= 0: floats (which ``int64`` would round), bools and
    negative numbers (which would count from the end) are refused.

    Raises:
        TypeError: ``value`` is not a sequence of integers.
        ValueError: ``value`` is not flat, or an index is negative.

    Example:
        >>> check_indices([2, 0, 1], 'indices')
        array([2, 0, 1])
        >>> check_indices([0.5], 'indices')
        Traceback (most recent call last):
        ...
        TypeError: indices must be a flat sequence of integers >= 0, got [0.5]
    """
    import numpy
    message = '{} must be a flat sequence of integers >= 0, got {}'.format(
        name, reprlib.repr(value))
    if isinstance(value, range):
        if len(value) and min(value[0], value[-1]) < 0:
            raise ValueError(message)
        return value
    if value is None or isinstance(value, (str, bytes, Mapping)) or not isinstance(
            value, Iterable):
        raise TypeError(message)
    try:
        array = numpy.asarray(value if isinstance(value, numpy.ndarray) else list(value))
    except ValueError:  # ragged
        raise TypeError(message) from None
    if array.size == 0 and array.ndim == 1:
        return numpy.zeros(0, numpy.int64)
    if array.dtype.kind not in 'iu':
        raise TypeError(message)
    if array.ndim != 1:
        raise ValueError('{} (shape {})'.format(message, array.shape))
    if (array < 0).any():
        raise ValueError(message)
    return array.astype(numpy.int64, copy=False)
