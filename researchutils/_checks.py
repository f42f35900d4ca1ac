"""Argument checks shared across packages (standard library only).

One rule for each kind of argument, so that every module accepts and refuses
the same values with the same words. All of them:

- refuse a bool where a number is meant (``True`` is a mistake, not 1),
  numbers.Integral and numbers.Real otherwise (NumPy scalars pass);
- refuse NaN always, and infinity where a finite number is meant;
- name the argument and show the value (``repr``) in the message;
- raise TypeError for a value of the wrong kind and ValueError for one out of
  range. ``type_error=ValueError`` keeps the ValueError of a module whose
  callers already rely on it.

Each returns the value converted (``int``, ``float``, ``bool``, ``list``, ``str``).

Tests: ``tests/test_checks.py``; that every public argument goes through them:
``tests/test_every_argument_checked.py``.
"""
import math
import numbers
import os
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, overload


def _none_or(allow_none: bool, kind: str) -> str:
    return kind + ' or None' if allow_none else kind


# Each check has two overloads: without allow_none=True its result is never None.
@overload
def check_int(value: object, name: str, *, minimum: int | None = None,
              maximum: int | None = None, allow_none: Literal[False] = False,
              type_error: type[Exception] = TypeError) -> int: ...
@overload
def check_int(value: object, name: str, *, minimum: int | None = None,
              maximum: int | None = None, allow_none: bool,
              type_error: type[Exception] = TypeError) -> int | None: ...
def check_int(value: object, name: str, *, minimum: int | None = None,
              maximum: int | None = None, allow_none: bool = False,
              type_error: type[Exception] = TypeError) -> int | None:
    """Returns ``value`` as an int in ``[minimum, maximum]`` (either bound optional).

    Raises:
        TypeError (or ``type_error``): ``value`` is a bool or not an integer.
        ValueError: ``value`` is out of range.

    Example:
        >>> check_int(3, 'num_splits', minimum=2)
        3
        >>> check_int(True, 'num_splits', minimum=2)
        Traceback (most recent call last):
        ...
        TypeError: num_splits must be an integer >= 2, got True
    """
    if value is None and allow_none:
        return None
    if minimum is not None and maximum is not None:
        kind = 'an integer in [{}, {}]'.format(minimum, maximum)
    elif minimum == 1:
        kind = 'a positive integer'
    elif minimum is not None:
        kind = 'an integer >= {}'.format(minimum)
    elif maximum is not None:
        kind = 'an integer <= {}'.format(maximum)
    else:
        kind = 'an integer'
    message = '{} must be {}, got {!r}'.format(name, _none_or(allow_none, kind), value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise type_error(message)
    number = int(value)
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ValueError(message)
    return number


@overload
def check_positive_int(value: object, name: str, *, allow_none: Literal[False] = False,
                       type_error: type[Exception] = TypeError) -> int: ...
@overload
def check_positive_int(value: object, name: str, *, allow_none: bool,
                       type_error: type[Exception] = TypeError) -> int | None: ...
def check_positive_int(value: object, name: str, *, allow_none: bool = False,
                       type_error: type[Exception] = TypeError) -> int | None:
    """Returns ``value`` as an int >= 1; see :func:`check_int`.

    Example:
        >>> check_positive_int(0, 'batch_size')
        Traceback (most recent call last):
        ...
        ValueError: batch_size must be a positive integer, got 0
    """
    return check_int(value, name, minimum=1, allow_none=allow_none, type_error=type_error)


@overload
def check_non_negative_int(value: object, name: str, *, allow_none: Literal[False] = False,
                           type_error: type[Exception] = TypeError) -> int: ...
@overload
def check_non_negative_int(value: object, name: str, *, allow_none: bool,
                           type_error: type[Exception] = TypeError) -> int | None: ...
def check_non_negative_int(value: object, name: str, *, allow_none: bool = False,
                           type_error: type[Exception] = TypeError) -> int | None:
    """Returns ``value`` as an int >= 0; see :func:`check_int`.

    Example:
        >>> check_non_negative_int(0, 'max_retries')
        0
    """
    return check_int(value, name, minimum=0, allow_none=allow_none, type_error=type_error)


@overload
def check_float(value: object, name: str, *, minimum: float | None = None,
                maximum: float | None = None, above: float | None = None,
                below: float | None = None, finite: bool = True,
                allow_none: Literal[False] = False,
                type_error: type[Exception] = TypeError) -> float: ...
@overload
def check_float(value: object, name: str, *, minimum: float | None = None,
                maximum: float | None = None, above: float | None = None,
                below: float | None = None, finite: bool = True, allow_none: bool,
                type_error: type[Exception] = TypeError) -> float | None: ...
def check_float(value: object, name: str, *, minimum: float | None = None,
                maximum: float | None = None, above: float | None = None,
                below: float | None = None, finite: bool = True, allow_none: bool = False,
                type_error: type[Exception] = TypeError) -> float | None:
    """Returns ``value`` as a float, never NaN, finite unless ``finite=False``.

    ``minimum`` / ``maximum`` are inclusive bounds, ``above`` / ``below``
    exclusive ones.

    Raises:
        TypeError (or ``type_error``): ``value`` is a bool or not a real number.
        ValueError: ``value`` is NaN, infinite (with ``finite=True``) or out of range.

    Example:
        >>> check_float(0.2, 'val_split', above=0, below=1)
        0.2
        >>> check_float(float('nan'), 'clip_min', finite=False)
        Traceback (most recent call last):
        ...
        ValueError: clip_min must be a number (not NaN), got nan
    """
    if value is None and allow_none:
        return None
    bounds = []
    if minimum is not None:
        bounds.append('>= {}'.format(minimum))
    if above is not None:
        bounds.append('> {}'.format(above))
    if maximum is not None:
        bounds.append('<= {}'.format(maximum))
    if below is not None:
        bounds.append('< {}'.format(below))
    kind = 'a finite number' if finite else 'a number (not NaN)'
    if bounds:
        kind += ' ' + ' and '.join(bounds)
    message = '{} must be {}, got {!r}'.format(name, _none_or(allow_none, kind), value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise type_error(message)
    number = float(value)
    if math.isnan(number) or (finite and math.isinf(number)):
        raise ValueError(message)
    if ((minimum is not None and number < minimum) or (maximum is not None and number > maximum)
            or (above is not None and not number > above)
            or (below is not None and not number < below)):
        raise ValueError(message)
    return number


@overload
def check_positive_float(value: object, name: str, *,
                         allow_none: Literal[False] = False) -> float: ...
@overload
def check_positive_float(value: object, name: str, *, allow_none: bool) -> float | None: ...
def check_positive_float(value: object, name: str, *, allow_none: bool = False) -> float | None:
    """Returns ``value`` as a finite float > 0; see :func:`check_float`.

    Example:
        >>> check_positive_float(float('inf'), 'retry_backoff')
        Traceback (most recent call last):
        ...
        ValueError: retry_backoff must be a finite number > 0, got inf
    """
    return check_float(value, name, above=0, allow_none=allow_none)


@overload
def check_non_negative_float(value: object, name: str, *,
                             allow_none: Literal[False] = False) -> float: ...
@overload
def check_non_negative_float(value: object, name: str, *, allow_none: bool) -> float | None: ...
def check_non_negative_float(value: object, name: str, *, allow_none: bool = False) -> float | None:
    """Returns ``value`` as a finite float >= 0; see :func:`check_float`.

    Example:
        >>> check_non_negative_float(0, 'delay')
        0.0
    """
    return check_float(value, name, minimum=0, allow_none=allow_none)


@overload
def check_timeout(value: object, name: str, *,
                  allow_none: Literal[False] = False) -> float: ...
@overload
def check_timeout(value: object, name: str, *, allow_none: bool) -> float | None: ...
def check_timeout(value: object, name: str, *, allow_none: bool = False) -> float | None:
    """Returns a timeout in seconds: a finite float > 0 (None too, with ``allow_none``).

    Zero would give up at once and infinity would never give up, so both are
    refused; a caller that means "no bound" says so with None where it allows it.

    Example:
        >>> check_timeout(10, 'flush_timeout')
        10.0
        >>> check_timeout(float('nan'), 'flush_timeout')
        Traceback (most recent call last):
        ...
        ValueError: flush_timeout must be a finite number > 0, got nan
    """
    return check_float(value, name, above=0, allow_none=allow_none)


@overload
def check_probability(value: object, name: str, *, allow_zero: bool = True,
                      allow_one: bool = True, allow_none: Literal[False] = False) -> float: ...
@overload
def check_probability(value: object, name: str, *, allow_zero: bool = True,
                      allow_one: bool = True, allow_none: bool) -> float | None: ...
def check_probability(value: object, name: str, *, allow_zero: bool = True,
                      allow_one: bool = True, allow_none: bool = False) -> float | None:
    """Returns a fraction in ``[0, 1]`` as a float; either end may be excluded.

    Example:
        >>> check_probability(1.0, 'val_split', allow_zero=False, allow_one=False)
        Traceback (most recent call last):
        ...
        ValueError: val_split must be a finite number > 0 and < 1, got 1.0
    """
    return check_float(value, name, minimum=0 if allow_zero else None,
                       above=None if allow_zero else 0, maximum=1 if allow_one else None,
                       below=None if allow_one else 1, allow_none=allow_none)


@overload
def check_bool(value: object, name: str, *, allow_none: Literal[False] = False) -> bool: ...
@overload
def check_bool(value: object, name: str, *, allow_none: bool) -> bool | None: ...
def check_bool(value: object, name: str, *, allow_none: bool = False) -> bool | None:
    """Returns ``value`` as a bool: True, False, NumPy's bools, or the integers 0 and 1.

    0 and 1 pass because Chainer's iterators and the original researchutils took them.

    Example:
        >>> check_bool(1, 'repeat')
        True
        >>> check_bool('no', 'shuffle')
        Traceback (most recent call last):
        ...
        TypeError: shuffle must be True or False, got 'no'
    """
    if value is None and allow_none:
        return None
    # NumPy's bool by name (numpy.bool_, named numpy.bool in NumPy 2): this module imports
    # the standard library only.
    if isinstance(value, bool) or (type(value).__module__ == 'numpy' and
                                   type(value).__name__ in ('bool_', 'bool')):
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise TypeError('{} must be {}, got {!r}'.format(
        name, 'True, False or None' if allow_none else 'True or False', value))


def check_seed(seed: object, name: str = 'seed') -> int | None:
    """Returns ``seed`` as an int, or None: a seed NumPy's ``RandomState`` takes.

    A bool is refused although it is an ``int``: ``seed=True`` is a mistake, not the seed 1.

    Raises:
        TypeError: ``seed`` is not None or an integer.
        ValueError: ``seed`` is outside ``[0, 2**32)``.

    Example:
        >>> check_seed(-1)
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an integer in [0, 2**32), got -1
    """
    if seed is None:
        return None
    message = '{} must be None or an integer in [0, 2**32), got {!r}'.format(name, seed)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(message)
    number = int(seed)
    if not 0 <= number < 2 ** 32:
        raise ValueError(message)
    return number


def check_devices(devices: object, name: str) -> list[object]:
    """Returns a device list: None is ``[]``, one device alone is a list of it.

    A device is a GPU number (an integer >= 0, never a bool) or anything else
    the caller resolves (a name such as ``'@numpy'``, a Chainer device); this
    only refuses what cannot be one, so that ``gpu_ids=1`` means GPU 1 and
    ``gpu_ids=True`` is an error rather than GPU 1.

    Raises:
        TypeError: an entry is a bool, a float or a container.
        ValueError: a GPU number is negative.

    Example:
        >>> check_devices(0, 'gpu_ids'), check_devices(None, 'gpu_ids')
        ([0], [])
        >>> check_devices(['@numpy', 1], 'gpu_ids')
        ['@numpy', 1]
    """
    if devices is None:
        return []
    if isinstance(devices, (numbers.Integral, str)) and not isinstance(devices, bool):
        devices = [devices]
    elif isinstance(devices, (bool, numbers.Number, bytes, dict)) or not hasattr(
            devices, '__iter__'):
        raise TypeError('{} must be a device (a GPU number or a device name), a list of them or '
                        'None, got {!r}'.format(name, devices))
    result = []
    for device in devices:
        if isinstance(device, bool) or (isinstance(device, numbers.Number)
                                        and not isinstance(device, numbers.Integral)):
            raise TypeError('{} entries must be GPU numbers (integers >= 0) or device names, '
                            'got {!r} in {!r}'.format(name, device, devices))
        if isinstance(device, (list, tuple, dict, set, bytes)):
            raise TypeError('{} entries must be GPU numbers (integers >= 0) or device names, '
                            'got {!r} in {!r}'.format(name, device, devices))
        if isinstance(device, numbers.Integral):
            if device < 0:
                raise ValueError('{} entries must be GPU numbers (integers >= 0) or device '
                                 'names, got {!r} in {!r}; use [] or None for the CPU'.format(
                                     name, device, devices))
            device = int(device)
        result.append(device)
    return result


@overload
def check_str(value: object, name: str, *, allow_empty: bool = True,
              allow_none: Literal[False] = False) -> str: ...
@overload
def check_str(value: object, name: str, *, allow_empty: bool = True,
              allow_none: bool) -> str | None: ...
def check_str(value: object, name: str, *, allow_empty: bool = True,
              allow_none: bool = False) -> str | None:
    """Returns ``value``, a str (non-empty unless ``allow_empty``).

    Raises:
        TypeError: ``value`` is not a str (bytes included).
        ValueError: ``value`` is empty and ``allow_empty`` is False.

    Example:
        >>> check_str('val/loss', 'monitor', allow_empty=False)
        'val/loss'
        >>> check_str(5, 'title')
        Traceback (most recent call last):
        ...
        TypeError: title must be a str, got 5
    """
    if value is None and allow_none:
        return None
    kind = 'a str' if allow_empty else 'a non-empty str'
    message = '{} must be {}, got {!r}'.format(name, _none_or(allow_none, kind), value)
    if not isinstance(value, str):
        raise TypeError(message)
    if not value and not allow_empty:
        raise ValueError(message)
    return value


@overload
def check_path(value: object, name: str, *, allow_none: Literal[False] = False) -> str: ...
@overload
def check_path(value: object, name: str, *, allow_none: bool) -> str | None: ...
def check_path(value: object, name: str, *, allow_none: bool = False) -> str | None:
    """Returns a path given as a ``str`` or an ``os.PathLike`` as a str.

    Integers (which ``open`` would take as a file descriptor, ``True`` being
    standard output), bytes and NUL bytes are refused, the same on every Python.

    Raises:
        TypeError: ``value`` is neither a str nor an ``os.PathLike`` giving a str.
        ValueError: ``value`` is empty or holds a NUL byte.

    Example:
        >>> check_path('runs/model.npz', 'path')
        'runs/model.npz'
        >>> check_path(1, 'file_path')
        Traceback (most recent call last):
        ...
        TypeError: file_path must be a path (a str or an os.PathLike), got 1
        >>> check_path('a\\0b', 'path')
        Traceback (most recent call last):
        ...
        ValueError: path must not hold a NUL byte, got 'a\\x00b'
    """
    if value is None and allow_none:
        return None
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        raise TypeError('{} must be a path ({}), got {!r}'.format(
            name, _none_or(allow_none, 'a str or an os.PathLike'), value))
    if '\0' in path:
        raise ValueError('{} must not hold a NUL byte, got {!r}'.format(name, path))
    if not path:
        raise ValueError('{} must be a path, got an empty str'.format(name))
    return path


def check_file_name(value: object, name: str) -> str:
    """Returns ``value``, the name of one file or folder: no separator, not '.' or '..'.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is empty, '.', '..', or holds a path separator or a NUL byte.

    Example:
        >>> check_file_name('exp', 'name')
        'exp'
        >>> check_file_name('..', 'name')  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: name must be one file or folder name (...), got '..'
    """
    text = check_str(value, name)
    separators = [sep for sep in (os.sep, os.altsep, '/') if sep]
    if text in ('', '.', '..') or '\0' in text or any(sep in text for sep in separators):
        raise ValueError("{} must be one file or folder name (not empty, '.' or '..', no path "
                         "separator or NUL byte), got {!r}".format(name, text))
    return text


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    """Returns ``value``, one of the strings ``choices``.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is not one of ``choices``.

    Example:
        >>> check_choice('max', 'mode', ('auto', 'min', 'max'))
        'max'
        >>> check_choice('best', 'mode', ('auto', 'min', 'max'))
        Traceback (most recent call last):
        ...
        ValueError: mode must be one of 'auto', 'min', 'max', got 'best'
    """
    message = '{} must be one of {}, got {!r}'.format(
        name, ', '.join(repr(choice) for choice in choices), value)
    if not isinstance(value, str):
        raise TypeError(message)
    if value not in choices:
        raise ValueError(message)
    return value


def check_callable(value: object, name: str, *, allow_none: bool = False) -> object:
    """Returns ``value``, a callable (or None with ``allow_none``).

    Example:
        >>> check_callable(5, 'load_fn')
        Traceback (most recent call last):
        ...
        TypeError: load_fn must be a callable, got 5
    """
    if (value is None and allow_none) or callable(value):
        return value
    raise TypeError('{} must be {}, got {!r}'.format(
        name, _none_or(allow_none, 'a callable'), value))


def check_str_list(value: object, name: str, *, allow_empty: bool = True) -> list[str]:
    """Returns ``value``, a list, tuple or other iterable of str (not a str itself), as a list.

    Raises:
        TypeError: ``value`` is a str, not iterable, or holds something else than a str.
        ValueError: ``value`` is empty and ``allow_empty`` is False.

    Example:
        >>> check_str_list(('epoch', 'main/loss'), 'entries')
        ['epoch', 'main/loss']
        >>> check_str_list(5, 'entries')
        Traceback (most recent call last):
        ...
        TypeError: entries must be a list of str, got 5
    """
    message = '{} must be a list of str, got {!r}'.format(name, value)
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise TypeError(message)
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError('{} must be a list of str, got {!r} in {!r}'.format(
                name, item, value))
    if not items and not allow_empty:
        raise ValueError('{} must not be empty, got {!r}'.format(name, value))
    return items


def check_mapping(value: object, name: str, *, allow_none: bool = False,
                  allow_empty: bool = True) -> dict[Any, Any] | None:
    """Returns ``value``, a mapping (a dict, say), as a dict; None with ``allow_none``.

    Raises:
        TypeError: ``value`` is not a mapping.
        ValueError: ``value`` is empty and ``allow_empty`` is False.

    Example:
        >>> check_mapping({'seed': 0}, 'sampler_kwargs')
        {'seed': 0}
        >>> check_mapping([('seed', 0)], 'sampler_kwargs')
        Traceback (most recent call last):
        ...
        TypeError: sampler_kwargs must be a mapping (a dict), got [('seed', 0)]
    """
    if value is None and allow_none:
        return None
    if not isinstance(value, Mapping):
        raise TypeError('{} must be {}, got {!r}'.format(
            name, _none_or(allow_none, 'a mapping (a dict)'), value))
    if not value and not allow_empty:
        raise ValueError('{} must not be empty, got {!r}'.format(name, value))
    return dict(value)


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


def check_comm(value: object, name: str = 'comm') -> Any:
    """Returns ``value``: None or a ChainerMN communicator (an object with int rank and size).

    Raises:
        TypeError: ``value`` is something else.

    Example:
        >>> check_comm(None) is None
        True
        >>> check_comm(5)
        Traceback (most recent call last):
        ...
        TypeError: comm must be a ChainerMN communicator (with int rank and size), got 5
    """
    if value is None or (isinstance(getattr(value, 'rank', None), int)
                         and isinstance(getattr(value, 'size', None), int)):
        return value
    raise TypeError('{} must be a ChainerMN communicator (with int rank and size), got '
                    '{!r}'.format(name, value))
