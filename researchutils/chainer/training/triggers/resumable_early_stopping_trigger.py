"""ResumableEarlyStoppingTrigger: Chainer's EarlyStoppingTrigger that survives a snapshot."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import chainer
from chainer.training import triggers

from researchutils._checks import check_bool, check_choice, check_int, check_str
from researchutils.chainer.training._trigger_checks import check_interval_trigger

# A (period, unit) pair or a Chainer trigger object.
TriggerLike = tuple[float, str] | Callable[[Any], bool]


class ResumableEarlyStoppingTrigger(triggers.EarlyStoppingTrigger):
    """Chainer's EarlyStoppingTrigger whose counters come back from a snapshot.

    Chainer's trigger keeps its best value and patience count only in memory,
    so a run resumed from a snapshot starts counting afresh. This one
    serializes them, and one thing more: a snapshot taken at an epoch's end
    holds that epoch's validation value, which the trigger sees only at the
    next iteration; it is saved as well and checked first on resume. A
    resumed run therefore stops at the epoch the uninterrupted one would.

    The arguments are Chainer's, checked when the trigger is made.

    Args:
        check_trigger (tuple or trigger): When to compare the monitored value: a
            ``(period, unit)`` pair (a whole period >= 1, the unit ``'epoch'`` or
            ``'iteration'``) or a Chainer trigger.
        monitor (str): The observation key to watch, such as ``'val/MSE'``.
        patience (int or None): How many checks without improvement stop the
            training, >= 1; None is Chainer's default, 3.
        mode (str): ``'min'`` (lower is better), ``'max'``, or ``'auto'`` (from
            the key: ``'max'`` for accuracies, ``'min'`` otherwise).
        verbose (bool): Print a line when the training stops early.
        max_trigger (tuple or trigger): When to stop anyway, as ``check_trigger``.
        patients (int or None): Chainer's older spelling of ``patience``,
            keyword only; give one of the two.

    Raises:
        TypeError: an argument of the wrong kind: ``patience`` a bool, a fraction or
            a str, ``verbose`` not a bool, ``monitor`` not a str, a trigger neither a
            pair nor a trigger.
        ValueError: ``patience`` below 1 or NaN, an unknown ``mode``, an empty
            ``monitor``, a trigger period below 1 or an unknown unit, or both
            ``patience`` and ``patients``.

    Example:
        >>> trigger = ResumableEarlyStoppingTrigger(
        ...     monitor='val/MSE', patience=2, mode='min', max_trigger=(10, 'epoch'))
        >>> trigger.patience
        2

        Use it as the Trainer's stop trigger:
        ``chainer.training.Trainer(updater, stop_trigger=trigger)``; the
        Trainer's snapshots then carry its state.
    """

    _trainer: chainer.training.Trainer | None = None
    _pending = float('nan')
    # Set by Chainer's __init__; declared for mypy, which cannot see them there.
    best: float
    count: int

    def __init__(self, check_trigger: TriggerLike = (1, 'epoch'), monitor: str = 'main/loss',
                 patience: int | None = None, mode: str = 'auto', verbose: bool = False,
                 max_trigger: TriggerLike = (100, 'epoch'), *,
                 patients: int | None = None) -> None:
        check_interval_trigger(check_trigger, 'check_trigger')
        check_interval_trigger(max_trigger, 'max_trigger')
        check_str(monitor, 'monitor', allow_empty=False)
        check_int(patience, 'patience', minimum=1, allow_none=True)
        check_int(patients, 'patients', minimum=1, allow_none=True)
        if patience is not None and patients is not None:
            raise ValueError('give patience or patients (its older spelling), not both: got '
                             'patience={!r}, patients={!r}'.format(patience, patients))
        check_choice(mode, 'mode', ('auto', 'min', 'max'))
        verbose = check_bool(verbose, 'verbose')
        if patience is None:
            patience = 3 if patients is None else patients
        super().__init__(check_trigger=check_trigger, monitor=monitor, patience=patience,
                         mode=mode, verbose=verbose, max_trigger=max_trigger)

    def __call__(self, trainer: chainer.training.Trainer) -> bool:
        self._trainer = trainer
        if not math.isnan(self._pending) and self.monitor not in trainer.observation:
            trainer.observation[self.monitor] = self._pending
        self._pending = float('nan')
        return super().__call__(trainer)

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        pending = float('nan')
        if self._trainer is not None:
            pending = float(self._trainer.observation.get(self.monitor, pending))
        self._pending = float(serializer('pending', pending))
        self.best = float(serializer('best', self.best))
        self.count = int(serializer('count', self.count))
        self._interval_trigger.serialize(serializer['interval_trigger'])
        self._max_trigger.serialize(serializer['max_trigger'])
