"""ResumableEarlyStoppingTrigger: Chainer's EarlyStoppingTrigger that survives a snapshot."""
from __future__ import annotations

import math

import chainer
from chainer.training import triggers


class ResumableEarlyStoppingTrigger(triggers.EarlyStoppingTrigger):
    """Chainer's EarlyStoppingTrigger whose counters come back from a snapshot.

    Chainer's trigger keeps its best value and patience count only in memory,
    so a run resumed from a snapshot starts counting afresh. This one
    serializes them, and one thing more: a snapshot taken at an epoch's end
    holds that epoch's validation value, which the trigger sees only at the
    next iteration; it is saved as well and checked first on resume. A
    resumed run therefore stops at the epoch the uninterrupted one would.

    The arguments are Chainer's: ``check_trigger``, ``monitor``,
    ``patience``, ``mode`` (``"min"``, ``"max"`` or ``"auto"``),
    ``verbose``, ``max_trigger``.

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
