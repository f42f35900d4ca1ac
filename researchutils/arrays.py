"""Small array helpers: one-hot matrices and the inverse of ``zip`` (NumPy only)."""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import DTypeLike, NDArray

from researchutils._checks import check_int

__all__ = ['one_hot', 'unzip']

_INTEGER_TYPES = (np.int8, np.int16, np.int32, np.int64)
_T = TypeVar('_T')


def one_hot(indices: Iterable[int | np.integer[Any]], shape: Sequence[int],
            on_value: Any = 1, off_value: Any = 0,
            dtype: DTypeLike | None = None) -> NDArray[Any]:
    """Makes one-hot column vectors side by side in a matrix.

    Column ``j`` of the result holds ``on_value`` in row ``indices[j]`` and
    ``off_value`` everywhere else.

    Args:
        indices (sequence of int): One row index per column, each in
            ``[0, shape[0])``; a list, a range or an integer array.
        shape (tuple of int): ``(rows, columns)``; ``columns`` must equal
            ``len(indices)``.
        on_value (scalar): The value at each index.
        off_value (scalar): The value everywhere else.
        dtype (numpy.dtype): The result's type. By default ``int8`` when both
            values are integers (the smallest signed integer type holding them
            when ``int8`` does not), else ``float32``.

    Returns:
        numpy.ndarray: The matrix, of shape ``shape``.

    Raises:
        ValueError: ``shape`` does not have two entries (non-negative integers), the
            number of indices is not the number of columns, an index is outside
            ``[0, rows)``, or ``on_value`` or ``off_value`` does not fit ``dtype``: out
            of an integer
            type's range (300 in ``int8`` would wrap to 44), not a whole number for
            an integer type, not 0 or 1 for ``bool``, or finite but beyond a float
            type's range (it would become infinity).
        TypeError: ``indices`` is not a sequence of integers, ``shape`` not a pair of
            integers (a bool is not one), ``dtype`` not a NumPy dtype, or ``on_value``
            or ``off_value`` is not a number where ``dtype`` holds numbers.

    Example:

        >>> from researchutils.arrays import one_hot
        >>> one_hot([2, 0, 1], (3, 3))
        array([[0, 1, 0],
               [0, 0, 1],
               [1, 0, 0]], dtype=int8)
        >>> one_hot([1], (2, 1), on_value=0.5)
        array([[0. ],
               [0.5]], dtype=float32)
    """
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise TypeError('shape must be (rows, columns), got {!r}'.format(shape))
    shape = tuple(shape)
    if len(shape) != 2:
        raise ValueError('shape must be (rows, columns), got {!r}'.format(shape))
    rows, columns = (check_int(size, 'shape[{}]'.format(position), minimum=0)
                     for position, size in enumerate(shape))
    shape = (rows, columns)
    indices = _row_indices(indices, rows)
    if len(indices) != columns:
        raise ValueError('one_hot needs one index per column: got {} indices for {} columns '
                         '(shape={!r})'.format(len(indices), columns, shape))
    if dtype is None:
        dtype = _default_dtype(on_value, off_value)
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError('dtype must be a NumPy dtype, got {!r}'.format(dtype)) from None
    for name, value in (('on_value', on_value), ('off_value', off_value)):
        _check_fits(name, value, dtype)
    result = np.full(shape, off_value, dtype=dtype)
    result[indices, np.arange(columns)] = on_value
    return result


def _row_indices(indices: Iterable[int | np.integer[Any]],
                 rows: int) -> NDArray[np.integer[Any]]:
    if isinstance(indices, (str, bytes)) or not isinstance(indices, Iterable):
        raise TypeError('indices must be a flat sequence of integers, got {!r}'.format(
            indices))
    values = np.asarray(list(indices) if not isinstance(indices, np.ndarray) else indices)
    if values.size == 0:
        return np.zeros(0, dtype=np.intp)
    if values.ndim != 1 or values.dtype == np.bool_ or not np.issubdtype(values.dtype,
                                                                         np.integer):
        raise TypeError('indices must be a flat sequence of integers, got {!r}'.format(
            indices))
    outside = np.flatnonzero((values < 0) | (values >= rows))
    if outside.size:
        position = int(outside[0])
        raise ValueError('indices[{}] = {} is outside the {} rows [0, {})'.format(
            position, values[position], rows, rows))
    return values


def _check_fits(name: str, value: object, dtype: np.dtype[Any]) -> None:
    # Checked in Python numbers: NumPy 1 wraps an out-of-range integer silently,
    # NumPy 2 raises OverflowError without naming the argument.
    if dtype.kind not in 'biuf':
        return
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise TypeError('{} must be a real number for an array of dtype {}, got {!r}'.format(
            name, dtype.name, value))
    if dtype.kind == 'f':
        try:
            as_float = float(value)
        except OverflowError:  # an int beyond float64
            as_float = math.inf
        else:
            if not math.isfinite(as_float):
                return  # NaN or infinity was asked for
        # Just above the type's largest value still rounds down to it.
        with np.errstate(over='ignore'):
            fits = bool(np.isfinite(np.float64(as_float).astype(dtype)))
        if not fits:
            raise ValueError('{}={!r} does not fit dtype {}: it would become infinity'.format(
                name, value, dtype.name))
        return
    if isinstance(value, numbers.Integral):
        whole = int(value)
    elif float(value).is_integer():
        whole = int(math.trunc(value))
    else:
        raise ValueError('{}={!r} does not fit dtype {}: it holds whole numbers only'.format(
            name, value, dtype.name))
    low, high = (0, 1) if dtype.kind == 'b' else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    if not low <= whole <= high:
        raise ValueError('{}={!r} does not fit dtype {}, which holds [{}, {}]'.format(
            name, value, dtype.name, low, high))


def _default_dtype(on_value: object, off_value: object) -> type[np.number[Any]]:
    values = [int(v) for v in (on_value, off_value) if isinstance(v, numbers.Integral)]
    if len(values) != 2:
        return np.float32
    for candidate in _INTEGER_TYPES:
        info = np.iinfo(candidate)
        if all(info.min <= v <= info.max for v in values):
            return candidate
    return np.int64


def unzip(zipped_array: Iterable[Sequence[_T]]) -> tuple[tuple[_T, ...], ...]:
    """Does the opposite of ``zip``: a sequence of tuples to a tuple of sequences.

    Args:
        zipped_array (iterable of sequences): Tuples (or lists, or array rows), all
            of the same length; any iterable, such as a ``zip`` object.

    Returns:
        tuple of tuple: The ``i``-th tuple holds the ``i``-th item of every
        element. Empty input gives ``()``.

    Raises:
        ValueError: The elements differ in length (``zip`` would silently cut them).
        TypeError: ``zipped_array`` is not iterable, or an element is not a sequence.

    Example:

        >>> from researchutils.arrays import unzip
        >>> names, counts = unzip([('cat', 3), ('dog', 5)])
        >>> names, counts
        (('cat', 'dog'), (3, 5))
    """
    if not isinstance(zipped_array, Iterable):
        raise TypeError('zipped_array must be an iterable of sequences, got {!r}'.format(
            zipped_array))
    rows = list(zipped_array)
    lengths = []
    for position, row in enumerate(rows):
        try:
            lengths.append(len(row))
        except TypeError:
            raise TypeError('zipped_array[{}] = {!r} is not a sequence'.format(
                position, row)) from None
        if lengths[-1] != lengths[0]:
            raise ValueError('zipped_array[{}] has {} items, zipped_array[0] {}: unzip needs '
                             'elements of one length'.format(position, lengths[-1],
                                                             lengths[0]))
    return tuple(zip(*rows))
