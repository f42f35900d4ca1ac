"""Search-space ranges for :class:`~researchutils.chainer.training.Parameters`.

A variable parameter is a list of candidates (a categorical choice, and a dimension of
:meth:`~researchutils.chainer.training.Parameters.grid`), or one of the ranges here, which only
:meth:`~researchutils.chainer.training.ChainerExperiment.search` samples: :class:`FloatRange`
and :class:`IntRange` (Optuna's ``FloatDistribution`` and ``IntDistribution``). Ranges are
plain records checked when made; they are saved in ``experiment.json`` as
``{"__float_range__": {"low": ..., "high": ..., "log": ..., "step": ...}}`` (``__int_range__``
for integers). Importing this module imports nothing beyond the standard library. Its tests
are in ``tests/chainer/training/test_search_space.py``.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar, cast

from researchutils._checks import check_str

# A float step divides high - low when the quotient is this close to an integer.
_STEP_TOLERANCE = 1e-9
# Optuna stores every sampled value as a float: an integer range keeps its values exact only
# within the integers a float holds exactly.
_EXACT_INT_LIMIT = 2 ** 53


def _number(value: object, argument: str, where: str, integer: bool) -> float:
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError('{}: {} must be {}, got {!r}'.format(
            where, argument, 'an integer' if integer else 'a real number', value))
    if integer:
        # An Integral (checked above): mypy narrows by the class in kind to numbers.Real.
        number = int(cast(numbers.Integral, value))
        if abs(number) > _EXACT_INT_LIMIT:
            raise ValueError('{}: {}={!r} is beyond 2**53 in size: Optuna stores the values '
                             'it samples as floats, which hold no larger integers exactly'
                             .format(where, argument, number))
        return number
    try:
        converted = float(value)
    except OverflowError:  # an int or Fraction past the largest float
        converted = math.inf
    if not math.isfinite(converted):
        raise ValueError('{}: {} must be finite, within the largest float, got {!r}'.format(
            where, argument, value))
    return converted


class _Range(object):
    """What FloatRange and IntRange share: low <= high, log scale or step, the checks."""

    _integer: ClassVar[bool] = False
    #: The key of the range's JSON form (``__float_range__``, ``__int_range__``).
    json_key: ClassVar[str]

    low: float
    high: float
    log: bool
    step: float | None

    def __init__(self, low: float, high: float, log: bool, step: float | None,
                 where: str | None) -> None:
        where = check_str(where, 'where', allow_none=True) or type(self).__name__
        self.low = _number(low, 'low', where, self._integer)
        self.high = _number(high, 'high', where, self._integer)
        if not isinstance(log, bool):
            raise TypeError('{}: log must be True or False, got {!r}'.format(where, log))
        self.log = log
        if self.low > self.high:
            raise ValueError('{}: low={!r} is above high={!r}'.format(where, self.low,
                                                                       self.high))
        if not math.isfinite(self.high - self.low):
            raise ValueError('{}: high - low overflows a float (low={!r}, high={!r}): '
                             'narrow the range'.format(where, self.low, self.high))
        if log and self.low <= 0:
            raise ValueError('{}: a log-scale range needs low > 0, got low={!r}'.format(
                where, self.low))
        if step is None and self._integer:
            raise TypeError('{}: step must be a positive integer, got None (1 takes every '
                            'integer from low to high)'.format(where))
        self.step = None if step is None else _number(step, 'step', where, self._integer)
        if self.step is None:
            return
        if self.step <= 0:
            raise ValueError('{}: step must be positive, got {!r}'.format(where, self.step))
        if log and (self.step != 1 or not self._integer):
            raise ValueError('{}: a log-scale range takes no step (got step={!r}): the '
                             'values are spread evenly in log space'.format(where, self.step))
        if not self._integer and not math.isfinite((self.high - self.low) / self.step):
            raise ValueError('{}: step={!r} cuts high - low = {!r} into more steps than a '
                             'float counts: choose a larger step'.format(
                                 where, self.step, self.high - self.low))
        if not self._on_step(self.high, self.step):
            raise ValueError('{}: step={!r} does not divide high - low = {!r}: choose high '
                             'as low plus a whole number of steps'.format(
                                 where, self.step, self.high - self.low))

    def contains(self, value: object) -> bool:
        """Whether ``value`` is a number this range can give (within low..high, on its step).

        Args:
            value: A value read back, e.g. from an Optuna study.

        Returns:
            bool: True for an in-range int (IntRange) or real number (FloatRange).
        """
        kind = numbers.Integral if self._integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind):
            return False
        # Any real number (a Fraction, a NumPy scalar) compares and subtracts with floats and
        # ints, which typeshed's numbers.Real does not say.
        number = cast(float, value)
        # Compared as they are: NaN and infinities fall outside, huge ints do not overflow.
        if not self.low <= number <= self.high:
            return False
        return self.step is None or self.log or self._on_step(number, self.step)

    def _on_step(self, value: float, step: float) -> bool:
        """Whether ``value`` (from low to high) is low plus a whole number of ``step``."""
        if self._integer:
            return (value - self.low) % step == 0
        steps = (value - self.low) / step
        return abs(steps - round(steps)) <= _STEP_TOLERANCE * max(1.0, steps)

    def to_json(self) -> dict[str, Any]:
        """Returns the range as JSON-ready data (what ``experiment.json`` holds).

        Returns:
            dict: ``{"__float_range__" or "__int_range__": {"low", "high", "log", "step"}}``.
        """
        return {self.json_key: {'low': self.low, 'high': self.high, 'log': self.log,
                                'step': self.step}}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Range) and type(self) is type(other) and (
            self.low, self.high, self.log, self.step) == (
                other.low, other.high, other.log, other.step)

    def __hash__(self) -> int:
        return hash((type(self), self.low, self.high, self.log, self.step))

    def __repr__(self) -> str:
        return '{}({!r}, {!r}, log={!r}, step={!r})'.format(
            type(self).__name__, self.low, self.high, self.log, self.step)


class FloatRange(_Range):
    """A real-valued search range: Optuna's ``FloatDistribution``.

    Args:
        low (float): The smallest value.
        high (float): The largest value, at least ``low``.
        log (bool): Sample on a log scale (then ``low > 0`` and no ``step``).
        step (float or None): Sample only ``low + k * step``; it must divide
            ``high - low``.

    Raises:
        TypeError: A bound or step is not a real number (bools are refused).
        ValueError: ``low > high``, a log range with ``low <= 0`` or a step,
            a step that is not positive or does not divide ``high - low`` (or
            cuts it into more steps than a float counts), a bound that is NaN,
            infinite or beyond the largest float, or a range wider than the
            largest float. The message names the argument.

    Example:
        >>> FloatRange(1e-4, 1e-1, log=True)
        FloatRange(0.0001, 0.1, log=True, step=None)
        >>> FloatRange(0.0, 1.0, step=0.3)
        Traceback (most recent call last):
        ...
        ValueError: FloatRange: step=0.3 does not divide high - low = 1.0: ...
    """

    json_key = '__float_range__'

    def __init__(self, low: float, high: float, log: bool = False, step: float | None = None,
                 *, where: str | None = None) -> None:
        super().__init__(low, high, log, step, where)


class IntRange(_Range):
    """An integer search range: Optuna's ``IntDistribution``.

    Args:
        low (int): The smallest value.
        high (int): The largest value, at least ``low``.
        log (bool): Sample on a log scale (then ``low > 0``, and ``step`` 1).
        step (int): Sample only ``low + k * step``; it must divide
            ``high - low``. The default 1 takes every integer.

    Raises:
        TypeError: A bound or step is not an integer (``step=None`` included).
        ValueError: As for :class:`FloatRange`, and a bound beyond ``2**53``
            in size (Optuna stores values as floats, which hold no larger
            integers exactly).

    Example:
        >>> IntRange(8, 64, step=8).contains(24)
        True
        >>> IntRange(5, 1)
        Traceback (most recent call last):
        ...
        ValueError: IntRange: low=5 is above high=1
    """

    _integer = True
    json_key = '__int_range__'

    low: int
    high: int
    step: int

    def __init__(self, low: int, high: int, log: bool = False, step: int = 1, *,
                 where: str | None = None) -> None:
        super().__init__(low, high, log, step, where)


RANGES = (FloatRange, IntRange)
