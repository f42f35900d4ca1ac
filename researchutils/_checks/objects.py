"""Checks of objects a caller hands over: callables, mappings, devices, communicators.

Standard library only. Tests: ``tests/test_checks.py``.
"""
import numbers
from collections.abc import Mapping
from typing import Any

from researchutils._checks.wording import none_or


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
        name, none_or(allow_none, 'a callable'), value))


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
            name, none_or(allow_none, 'a mapping (a dict)'), value))
    if not value and not allow_empty:
        raise ValueError('{} must not be empty, got {!r}'.format(name, value))
    return dict(value)


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
