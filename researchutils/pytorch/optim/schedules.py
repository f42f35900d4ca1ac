"""Chainer's ExponentialShift and LinearShift as schedules of a torch optimizer.

Chainer's extensions set an optimizer attribute each time their trigger fires (each
iteration by default); these set the same value in every param group of a torch optimizer,
each time :meth:`step` is called, so call ``step()`` where the Chainer trigger fired (after
``optimizer.step()``, once per iteration for the default trigger). Their state is Chainer's:
the count of calls ``t`` and the value last set, so a run resumed from a Chainer snapshot
(:func:`~researchutils.pytorch.from_chainer_schedule`) goes on with Chainer's next value.

Unlike torch's learning-rate schedulers they act on any hyper-parameter of the group (``lr``,
``momentum``, :class:`~researchutils.pytorch.ChainerAdam`'s ``eta`` ...), as Chainer's do.

Tests: ``tests/pytorch/optim/test_schedules.py``; against Chainer's own extensions in a
run: ``tests/pytorch/optim/test_conversion.py``.
"""
from __future__ import annotations

from typing import Any

import torch

from researchutils._checks import check_float, check_non_negative_int, check_str


def _check_attr(optimizer: Any, attr: object) -> str:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError('optimizer must be a torch.optim.Optimizer, got {!r}'.format(optimizer))
    attr = check_str(attr, 'attr', allow_empty=False)
    for group in optimizer.param_groups:
        if attr not in group or isinstance(group[attr], (bool, tuple)):
            raise ValueError('attr {!r} is not a number of every param group of {}; they '
                             'have {}'.format(attr, type(optimizer).__name__,
                                              sorted(group)))
    return attr


class _Shift(object):
    """The state and the writing shared by the two schedules."""

    def __init__(self, optimizer: Any, attr: object) -> None:
        self.optimizer = optimizer
        self.attr = _check_attr(optimizer, attr)
        self.t = 0
        self.last_value: float | None = None

    def _value(self) -> float:
        raise NotImplementedError

    def _set(self, value: float) -> None:
        for group in self.optimizer.param_groups:
            group[self.attr] = value
        self.last_value = value

    def step(self) -> None:
        """Counts one call and sets the attribute to the schedule's next value."""
        self.t += 1
        self._set(self._value())

    def state_dict(self) -> dict[str, Any]:
        """``{'t': calls so far, 'last_value': the value last set}``, Chainer's ``_t`` and
        ``_last_value``."""
        return {'t': self.t, 'last_value': self.last_value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict`'s state and sets its last value, as Chainer's resume
        does."""
        self.t = check_non_negative_int(state['t'], "state['t']")
        last_value = check_float(state['last_value'], "state['last_value']", allow_none=True)
        if last_value is not None:
            self._set(last_value)


class ExponentialShift(_Shift):
    """Chainer's ``ExponentialShift``: after call ``t``, ``attr = init * rate ** t``, stopped at
    ``target``.

    Args:
        optimizer (torch.optim.Optimizer): Its param groups' ``attr`` is set.
        attr (str): The param-group key (``'lr'``; Chainer's Adam's ``alpha`` is ``'lr'``).
        rate (float): Multiplier per call, >= 0.
        init (float or None): The first value; None takes the first group's current value.
            It is set at once, as Chainer's extension sets it when training starts.
        target (float or None): The value where the shift stops.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        >>> schedule = ExponentialShift(optimizer, 'lr', 0.5, target=0.03)
        >>> schedule.step()
        >>> optimizer.param_groups[0]['lr']
        0.05
        >>> schedule.step()
        >>> optimizer.param_groups[0]['lr']
        0.03
    """

    def __init__(self, optimizer: Any, attr: str, rate: float, init: float | None = None,
                 target: float | None = None) -> None:
        super().__init__(optimizer, attr)
        self.rate = check_float(rate, 'rate', minimum=0.0)
        if init is None:
            init = optimizer.param_groups[0][self.attr]
        self.init = check_float(init, 'init')
        self.target = check_float(target, 'target', allow_none=True)
        self._set(self.init)

    def _value(self) -> float:
        value = self.init * self.rate ** self.t
        # Chainer compares the ratio, which also works for negative values.
        if self.target is not None and (
                value / self.target > 1 if self.rate > 1 else value / self.target < 1):
            value = self.target
        return value


class LinearShift(_Shift):
    """Chainer's ``LinearShift``: ``attr`` goes linearly from ``value_range[0]`` to
    ``value_range[1]`` between calls ``time_range[0]`` and ``time_range[1]``.

    Args:
        optimizer (torch.optim.Optimizer): Its param groups' ``attr`` is set.
        attr (str): The param-group key (``'lr'``, ``'momentum'`` ...).
        value_range (tuple of float): The first and the last value.
        time_range (tuple of int): The calls where the shift starts and ends
            (``0 <= start < end``).

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.5)
        >>> schedule = LinearShift(optimizer, 'momentum', (0.5, 0.9), (0, 4))
        >>> for _ in range(2):
        ...     schedule.step()
        >>> round(optimizer.param_groups[0]['momentum'], 6)
        0.7
    """

    def __init__(self, optimizer: Any, attr: str, value_range: tuple[float, float],
                 time_range: tuple[int, int]) -> None:
        super().__init__(optimizer, attr)
        if not isinstance(value_range, (tuple, list)) or len(value_range) != 2:
            raise TypeError('value_range must be a pair (first, last), got {!r}'.format(
                value_range))
        if not isinstance(time_range, (tuple, list)) or len(time_range) != 2:
            raise TypeError('time_range must be a pair (start, end), got {!r}'.format(
                time_range))
        self.value_range = (check_float(value_range[0], 'value_range[0]'),
                            check_float(value_range[1], 'value_range[1]'))
        start = check_non_negative_int(time_range[0], 'time_range[0]')
        end = check_non_negative_int(time_range[1], 'time_range[1]')
        if end <= start:
            raise ValueError('time_range must have start < end, got {!r}'.format(time_range))
        self.time_range = (start, end)
        self._set(self._value())

    def _value(self) -> float:
        (start, end), (first, last) = self.time_range, self.value_range
        if self.t <= start:
            return first
        if self.t >= end:
            return last
        return first + (self.t - start) / (end - start) * (last - first)
