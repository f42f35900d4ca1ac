"""The check of a trigger argument, shared by the training triggers and extensions.

Tests: ``tests/chainer/training/triggers/test_resumable_early_stopping_trigger.py`` and
the whole-API test, ``tests/test_every_argument_checked.py``.
"""
from __future__ import annotations

import numbers
from typing import Any

_UNITS = ('epoch', 'iteration')


def check_interval_trigger(value: object, name: str) -> Any:
    """Returns ``value``: a ``(period, unit)`` pair with a whole period >= 1, or a trigger.

    A pair's period counts epochs or iterations: a bool, a fraction, zero, a negative
    number or NaN is refused; its unit is ``'epoch'`` or ``'iteration'``. Anything
    callable (a Chainer trigger object) is passed as it is.

    Raises:
        TypeError: ``value`` is neither a pair nor callable, or the period is not an
            integer.
        ValueError: the period is below 1, or the unit is neither 'epoch' nor 'iteration'.
    """
    if callable(value):
        return value
    message = '{} must be a trigger or a (period, unit) pair such as (1, "epoch"), with a ' \
              'whole period >= 1 and the unit "epoch" or "iteration", got {!r}'.format(
                  name, value)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(message)
    period, unit = value
    if isinstance(period, bool) or not isinstance(period, numbers.Real):
        raise TypeError(message)
    if isinstance(period, numbers.Integral):
        whole = True
    else:
        whole = float(period).is_integer()
    if not whole:
        raise TypeError(message)
    if period < 1 or unit not in _UNITS:
        raise ValueError(message)
    return value
