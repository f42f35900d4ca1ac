"""Checks of numbers: integers, floats, timeouts, probabilities, bools and seeds.

Standard library only; NumPy's scalars pass as the numbers they are, a bool never
passes as a number. Tests: ``tests/test_checks.py``.
"""
import math
import numbers
from typing import Literal, overload

from researchutils._checks.wording import none_or


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
    message = '{} must be {}, got {!r}'.format(name, none_or(allow_none, kind), value)
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
    message = '{} must be {}, got {!r}'.format(name, none_or(allow_none, kind), value)
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
